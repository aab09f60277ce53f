"""The runtime's MCP server: episodes and `load_lora` / `offload_lora` for MCP clients.

The standard path follows the MCP revision of 2026-07-28, which has no protocol sessions:
state that spans calls travels in a handle the server mints and the client passes back as an
ordinary tool argument. `open_episode` opens an episode and returns its secret handle (with
the library revision and capabilities it is pinned to); `load_lora`, `offload_lora` and
`close_episode` take that handle as their `episode` argument. A handle works only with the
bearer token that opened it and expires when idle (`runtime.handles`).

Older clients may still omit the handle: a stateful session (`Mcp-Session-Id`, mode="legacy"),
the single client of a stdio server, or a request naming its episode in
`_meta["weact/episode"]` is bound to an episode of its own. The tool calls themselves run
through the episode's `AdapterControl` (`runtime.lora_tools`), as the agent loop's do.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

from runtime.chat import LOAD_LORA, OFFLOAD_LORA
from runtime.errors import HandleError
from runtime.handles import owner_of
from runtime.lora_tools import load_description

if TYPE_CHECKING:
    from mcp.server import MCPServer

    from runtime.episode import Episode, EpisodeManager

EPISODE_META_KEY = "weact/episode"
OPEN_EPISODE = "open_episode"
CLOSE_EPISODE = "close_episode"
HANDLE_TOOLS = (OPEN_EPISODE, LOAD_LORA, OFFLOAD_LORA, CLOSE_EPISODE)

HANDLE_HELP = (
    "`episode` is the handle open_episode returned: pass it on every call of this episode "
    "(it may be omitted only on a legacy MCP session or stdio)."
)
OPEN_DESCRIPTION = (
    "Open a WeAct episode: your own adapter state on this node, with no LoRA adapter active. "
    "Returns `episode`, a secret handle: pass it as the `episode` argument of load_lora, "
    "offload_lora and close_episode, and keep it to yourself. Also returns `capabilities` "
    "(what load_lora accepts in this episode: fixed for its life, even when the node's "
    "library is updated) and the library `revision` the episode is pinned to. Open one "
    "episode per task; a handle unused for `idle_timeout_s` seconds expires."
)
CLOSE_DESCRIPTION = (
    "Close a WeAct episode when its task is done, freeing its state; the handle is spent. "
    + HANDLE_HELP
)
OFFLOAD_HELP = (
    "Offload the active LoRA adapter of your episode; the bare backbone speaks next and may "
    "load another one. " + HANDLE_HELP
)


def load_help(library: Any) -> str:
    return load_description(library) + "\n" + HANDLE_HELP


def build_mcp_server(episodes: EpisodeManager, *, stdio: bool = False) -> MCPServer:
    """An MCP server with open_episode / load_lora / offload_lora / close_episode."""
    import anyio
    from mcp.server import MCPServer
    from mcp.server.mcpserver import Context
    from pydantic import Field

    class RuntimeMcpServer(MCPServer):
        async def list_tools(self) -> list[Any]:
            """load_lora describes the node's current library, not the one at start-up."""
            described = load_help(episodes.engine.adapters)
            return [
                t.model_copy(update={"description": described}) if t.name == LOAD_LORA else t
                for t in await super().list_tools()
            ]

    server = RuntimeMcpServer(
        "weact-runtime",
        instructions=(
            "WeAct internal actions: open an episode, then switch LoRA adapters in it with "
            "load_lora / offload_lora, passing the episode handle on every call."
        ),
    )
    tools = _Tools(episodes, stdio)

    async def open_episode(ctx):  # type: ignore[no-untyped-def]
        return await anyio.to_thread.run_sync(tools.open, ctx)

    async def load_lora(capability, episode, ctx):  # type: ignore[no-untyped-def]
        return await tools.run(ctx, episode, LOAD_LORA, {"capability": capability})

    async def offload_lora(episode, ctx):  # type: ignore[no-untyped-def]
        return await tools.run(ctx, episode, OFFLOAD_LORA, {})

    async def close_episode(episode, ctx):  # type: ignore[no-untyped-def]
        return await anyio.to_thread.run_sync(tools.close, ctx, episode)

    # Real objects, not the strings `from __future__ import annotations` would leave: the SDK
    # builds the input schemas from them and cannot see this function's local imports.
    handle = Annotated[str | None, Field(default=None, description="handle from open_episode")]
    capability = Annotated[str, Field(description="the capability to load")]
    result = dict[str, Any]
    open_episode.__annotations__ = {"ctx": Context, "return": result}
    load_lora.__annotations__ = {
        "capability": capability,
        "episode": handle,
        "ctx": Context,
        "return": result,
    }
    offload_lora.__annotations__ = {"episode": handle, "ctx": Context, "return": result}
    close_episode.__annotations__ = {
        "episode": Annotated[str, Field(description="the handle from open_episode")],
        "ctx": Context,
        "return": result,
    }
    server.add_tool(open_episode, name=OPEN_EPISODE, description=OPEN_DESCRIPTION)
    server.add_tool(load_lora, name=LOAD_LORA, description=load_help(episodes.engine.adapters))
    server.add_tool(offload_lora, name=OFFLOAD_LORA, description=OFFLOAD_HELP)
    server.add_tool(close_episode, name=CLOSE_EPISODE, description=CLOSE_DESCRIPTION)
    return server


class _Tools:
    """The tool functions of one server; errors reach the client as tool errors."""

    def __init__(self, episodes: EpisodeManager, stdio: bool) -> None:
        self.episodes = episodes
        self.stdio = stdio

    def open(self, ctx: Any) -> dict[str, Any]:
        episode, handle = self.episodes.open(owner=_owner(ctx))
        return {
            "episode": handle,
            "episode_id": episode.id,
            "revision": episode.revision,
            "capabilities": {n: s.description for n, s in sorted(episode.control.library.items())},
            "active": None,
            "idle_timeout_s": self.episodes.handles.idle_s,
        }

    def close(self, ctx: Any, handle: str) -> dict[str, Any]:
        from mcp.server.mcpserver.exceptions import ToolError

        try:
            closed = self.episodes.close_handle(handle, owner=_owner(ctx))
        except HandleError as exc:
            raise ToolError(str(exc)) from None
        return {"closed": True, "episode_id": closed.id}

    async def run(
        self, ctx: Any, handle: str | None, name: str, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        import anyio
        from mcp.server.mcpserver.exceptions import ToolError

        try:
            episode = self._episode(ctx, handle)
        except HandleError as exc:
            raise ToolError(str(exc)) from None
        episode.events.emit("tool_call", name=name, arguments=arguments, via="mcp")
        outcome = await anyio.to_thread.run_sync(episode.control.call, name, arguments)
        episode.events.emit(
            "tool_result", name=name, content=outcome.content, is_error=outcome.is_error
        )
        if outcome.is_error:
            raise ToolError(outcome.message)
        return {"episode_id": episode.id, **json.loads(outcome.content)}

    def _episode(self, ctx: Any, handle: str | None) -> Episode:
        """The episode of this call: its handle, else a legacy binding (session, _meta)."""
        from mcp.server.mcpserver.exceptions import ToolError

        if handle is not None:
            return self.episodes.by_handle(handle, owner=_owner(ctx))
        meta = ctx.request_context.meta or {}
        headers = ctx.headers or {}
        if isinstance(meta.get(EPISODE_META_KEY), str):
            owner = _owner(ctx)
            return self.episodes.bind(f"name:{owner}:{meta[EPISODE_META_KEY]}", owner=owner)
        if headers.get("mcp-session-id"):
            return self.episodes.bind(f"mcp:{headers['mcp-session-id']}", owner=_owner(ctx))
        if self.stdio or ctx.request_context.request is None:
            return self.episodes.bind("process")  # a stdio server has exactly one client
        raise ToolError(
            "no episode: call open_episode first and pass the handle it returns as the "
            "`episode` argument of every load_lora / offload_lora call"
        )


def _owner(ctx: Any) -> str:
    """Who is calling: a digest of the request's bearer credentials ("" on stdio)."""
    headers = ctx.headers or {}
    return owner_of(headers.get("authorization"))
