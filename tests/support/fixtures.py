"""Pytest fixtures and hooks for every test package (a plugin: `pytest_plugins` in
tests/conftest.py).

- `registry_server` (module): the registry on its embedded defaults (SQLite and a blob
  directory in a temp dir) served over real HTTP from a thread of the test process
  (`support.serving.registry_in_process`: `weact serve`'s own preparation and app); yields
  the `InProcessRegistry`. `registry_server.bootstrap_token(name, "admin")` gives the first
  token. For the tests of its clients (runtime, trainers); tests of the server process
  itself start `weact serve` with `registry.launcher.embedded_registry`.
- The browser tests' screenshots (`support.shots.TAKEN`) are listed in the terminal summary
  ("web UI screenshots"); under pytest-xdist each worker sends its list to the controller.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.serving import InProcessRegistry, registry_in_process
from support.shots import TAKEN


@pytest.fixture(scope="module")
def registry_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessRegistry]:
    with registry_in_process(tmp_path_factory.mktemp("registry")) as server:
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
