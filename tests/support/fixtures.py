"""Pytest fixtures for every test package (a plugin: `pytest_plugins` in tests/conftest.py).

- `registry_server` (module): a real `weact serve` child process on its embedded defaults
  (SQLite and a blob directory in a temp dir), started by the product's own launcher
  (`cli.launcher.embedded_registry`, the one the demo uses); yields the `EmbeddedRegistry`.
  `registry_server.bootstrap_token(name, "admin")` gives the first token. Tests that need
  another database or blob store call `embedded_registry` with those URLs themselves.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cli.launcher import EmbeddedRegistry, embedded_registry


@pytest.fixture(scope="module")
def registry_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRegistry]:
    with embedded_registry(tmp_path_factory.mktemp("registry")) as server:
        yield server
