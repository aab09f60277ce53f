"""The runtime's MCP server: `load_lora` / `offload_lora` for MCP clients, with the `mcp` SDK.

Each MCP session drives its own episode: a stateful session (`Mcp-Session-Id` over streamable
HTTP, or the single client of a stdio server) is bound to one; a stateless (2026-07-28)
request names its episode in `_meta["weact/episode"]`. The tool calls themselves run through
the episode's `AdapterControl` (`runtime.tools`), as the agent loop's do.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

from runtime.tools import LOAD_LORA, OFFLOAD_DESCRIPTION, OFFLOAD_LORA, load_description

if TYPE_CHECKING:
    from mcp.server import MCPServer

    from runtime.episode import Episode, EpisodeManager

EPISODE_META_KEY = "weact/episode"


def build_mcp_server(episodes: EpisodeManager, *, stdio: bool = False) -> MCPServer:
    """An MCP server with load_lora / offload_lora, each MCP session on its own episode."""
    import anyio
    from mcp.server import MCPServer
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import Field

    server: MCPServer = MCPServer(
        "weact-runtime", instructions="WeAct internal actions: switch LoRA adapters."
    )

    async def run(ctx: Context, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        episode = _bound_episode(episodes, ctx, stdio)
        episode.events.emit("tool_call", name=name, arguments=arguments, via="mcp")
        outcome = await anyio.to_thread.run_sync(episode.control.call, name, arguments)
        episode.events.emit(
            "tool_result", name=name, content=outcome.content, is_error=outcome.is_error
        )
        if outcome.is_error:
            raise ToolError(outcome.message)
        return {"episode": episode.id, **json.loads(outcome.content)}

    async def load_lora(capability, ctx):  # type: ignore[no-untyped-def]
        return await run(ctx, LOAD_LORA, {"capability": capability})

    async def offload_lora(ctx):  # type: ignore[no-untyped-def]
        return await run(ctx, OFFLOAD_LORA, {})

    # Real objects, not the strings `from __future__ import annotations` would leave: the SDK
    # builds the input schemas from them and cannot see this function's local imports.
    capability_type = Annotated[str, Field(description="the capability to load")]
    load_lora.__annotations__ = {
        "capability": capability_type,
        "ctx": Context,
        "return": dict[str, Any],
    }
    offload_lora.__annotations__ = {"ctx": Context, "return": dict[str, Any]}
    server.add_tool(
        load_lora, name=LOAD_LORA, description=load_description(episodes.engine.adapters)
    )
    server.add_tool(offload_lora, name=OFFLOAD_LORA, description=OFFLOAD_DESCRIPTION)
    return server


def _bound_episode(episodes: EpisodeManager, ctx: Any, stdio: bool) -> Episode:
    """The episode of this MCP request: named in `_meta`, or bound to its MCP session."""
    from mcp.server.mcpserver.exceptions import ToolError

    meta = ctx.request_context.meta or {}
    headers = ctx.headers or {}
    if isinstance(meta.get(EPISODE_META_KEY), str):
        return episodes.bind(f"name:{meta[EPISODE_META_KEY]}")
    if headers.get("mcp-session-id"):
        return episodes.bind(f"mcp:{headers['mcp-session-id']}")
    if stdio or ctx.request_context.request is None:
        return episodes.bind("process")  # a stdio server has exactly one client
    raise ToolError(
        "stateless MCP request: name your episode in _meta "
        f'{{"{EPISODE_META_KEY}": "<name>"}} or connect with a session (mode="legacy")'
    )
