"""Pytest fixtures and hooks for every test package (a plugin: `pytest_plugins` in
tests/conftest.py).

- `registry_server` (module): a real `weact serve` child process on its embedded defaults
  (SQLite and a blob directory in a temp dir), started by the product's own launcher
  (`registry.launcher.embedded_registry`, the one the demo uses); yields the `EmbeddedRegistry`.
  `registry_server.bootstrap_token(name, "admin")` gives the first token. Tests that need
  another database or blob store call `embedded_registry` with those URLs themselves.
- The browser tests' screenshots (`support.shots.TAKEN`) are listed in the terminal summary
  ("web UI screenshots"); under pytest-xdist each worker sends its list to the controller.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from registry.launcher import EmbeddedRegistry, embedded_registry
from support.shots import TAKEN


@pytest.fixture(scope="module")
def registry_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRegistry]:
    with embedded_registry(tmp_path_factory.mktemp("registry")) as server:
        yield server


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)  # set on xdist workers only
    if workeroutput is not None:
        workeroutput["screenshots"] = [str(path) for path in TAKEN]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist's controller: a worker finished; keep the screenshots it took."""
    TAKEN.extend(Path(path) for path in getattr(node, "workeroutput", {}).get("screenshots", ()))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TAKEN:
        return
    terminalreporter.section("web UI screenshots")
    terminalreporter.write_line(f"folder: {TAKEN[0].parent}")
    for path in TAKEN:
        terminalreporter.write_line(f"  {path}")
