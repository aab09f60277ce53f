"""The runtime's MCP tools over stdio on a scripted engine (plan, search, write).

`python -m support.mcp_stdio` runs the server (with `tests/` on the path); tests start it
through `stdio_parameters()`, which sets that path for the child.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from runtime.episode import EpisodeManager
from runtime.mcp_server import build_mcp_server
from runtime.policy import SoftPolicy
from support import ROOT
from support.engines import ScriptedEngine


def stdio_parameters() -> Any:  # -> mcp.StdioServerParameters
    """How an `mcp.Client` starts this server as a child process of this interpreter."""
    from mcp import StdioServerParameters

    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return StdioServerParameters(
        command=sys.executable, args=["-m", "support.mcp_stdio"], env={"PYTHONPATH": path}
    )


def main() -> None:  # pragma: no cover - exercised through a subprocess
    episodes = EpisodeManager(ScriptedEngine(), policy=SoftPolicy())
    build_mcp_server(episodes, stdio=True).run("stdio")


if __name__ == "__main__":  # pragma: no cover
    main()
