"""Web page fixtures: a registry populated through its API (see ``webworld``), and the
screenshot folder of the browser test, listed at the end of the run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from harness import World
from shots import TAKEN, Shots
from webworld import Site, populate


@pytest.fixture
def site(sqlite_world: World) -> Site:
    """The populated registry on SQLite (the pages' subject is not the database)."""
    return populate(sqlite_world)


@pytest.fixture
def any_site(world: World) -> Site:
    """The populated registry on SQLite and on PostgreSQL."""
    return populate(world)


@pytest.fixture(scope="session")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Shots:
    """Where screenshots go: ``$WEACT_SCREENSHOTS``, else a folder under pytest's temp dir."""
    configured = os.environ.get("WEACT_SCREENSHOTS")
    folder = Path(configured) if configured else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return Shots(folder)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TAKEN:
        return
    terminalreporter.section("web UI screenshots")
    terminalreporter.write_line(f"folder: {TAKEN[0].parent}")
    for path in TAKEN:
        terminalreporter.write_line(f"  {path}")
