"""A small suite generated once per test session (the default sizes are for real runs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from suite_helpers import SMALL

from evals.suite import Suite, generate_suite, write_suite


@pytest.fixture(scope="session")
def small_suite() -> Suite:
    return generate_suite("research", seed=7, sizes=SMALL)


@pytest.fixture(scope="session")
def suite_dir(small_suite: Suite, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_suite(small_suite, tmp_path_factory.mktemp("suite"))
