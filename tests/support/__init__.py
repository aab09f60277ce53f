"""Test support for the whole suite; never installed with the product.

pytest puts `tests/` on `sys.path` (`pythonpath` in pyproject.toml), so tests import
`support.<module>`:

- `support.engines`: `ScriptedEngine`, `ForcedEngine`, `CharTokenizer` and script helpers
  (`by_adapter`, `call`, `spec_for`): the runtime's `Engine` seam driven by scripts.
- `support.serving`: `serve(app)` runs an ASGI app under uvicorn on a free local port;
  `registry_in_process` serves the registry that way.
- `support.mcp_stdio`: `python -m support.mcp_stdio` serves the runtime's MCP tools over
  stdio on a scripted engine; `stdio_parameters()` starts it from a test.
- `support.long_polls`: `poll_in_thread` (a channel long-poll in a thread) and
  `wait_for_polls` (until a server's gauge shows them open).
- `support.shots`: the browser tests' screenshots, listed at the end of the run.
- `support.fixtures` (a pytest plugin loaded by tests/conftest.py): `registry_server`, the
  registry over real HTTP from a thread of the test process (`support.serving`).
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The directory that holds this package (`tests/`): what a child process needs on its path."""
