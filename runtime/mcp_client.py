"""The client of external MCP tool servers: their tools, offered to the model and called.

`McpToolbox` connects to each target (`mcp.Client`: a streamable-HTTP URL, a
`StdioServerParameters` or an in-process `MCPServer`), lists their tools in the chat
template's `tools` shape and routes each call to the server that offers it. A name offered by
two servers, or one of the runtime's own (`load_lora` / `offload_lora`), is refused
(`ToolConflictError`). `mcp` is imported on first use.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any

from runtime.errors import ToolConflictError
from runtime.lora_tools import INTERNAL_TOOLS, ToolOutcome


def mcp_tool_schema(tool: Any) -> dict[str, Any]:
    """An `mcp` Tool in the OpenAI `tools` shape of the chat template."""
    schema = dict(tool.input_schema or {"type": "object", "properties": {}})
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description or "",
            "parameters": schema,
        },
    }


class McpToolbox:
    """External tools served by MCP servers; use as `async with McpToolbox([...]) as box`.

    A target is anything `mcp.Client` connects to: a streamable-HTTP URL, a
    `StdioServerParameters`, or an in-process `MCPServer`.
    """

    def __init__(self, targets: Sequence[Any] = ()) -> None:
        self.targets = list(targets)
        self._routes: dict[str, Any] = {}
        self._schemas: list[dict[str, Any]] = []
        self._stack: AsyncExitStack | None = None

    async def __aenter__(self) -> McpToolbox:
        from mcp import Client

        stack = AsyncExitStack()
        try:
            for target in self.targets:
                client = await stack.enter_async_context(Client(target))
                problem = self._add(client, (await client.list_tools()).tools)
                if problem:
                    raise ToolConflictError(problem)
        except BaseException:
            await stack.aclose()  # outside the clients' task groups: the error stays unwrapped
            raise
        self._stack = stack
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._stack is not None:
            await self._stack.aclose()
        self._stack = None

    def _add(self, client: Any, tools: Sequence[Any]) -> str | None:
        for tool in tools:
            if tool.name in INTERNAL_TOOLS:
                return f"tool name {tool.name!r} is reserved for the runtime's internal actions"
            if tool.name in self._routes:
                return f"tool name {tool.name!r} is offered by two servers"
            self._routes[tool.name] = client
            self._schemas.append(mcp_tool_schema(tool))
        return None

    def schemas(self) -> list[dict[str, Any]]:
        return list(self._schemas)

    def __contains__(self, name: object) -> bool:
        return name in self._routes

    async def call(self, name: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        from mcp import MCPError

        try:
            result = await self._routes[name].call_tool(name, dict(arguments))
        except MCPError as exc:
            return ToolOutcome.error(f"{name}: {exc}")
        text = _result_text(result)
        return ToolOutcome.error(text) if result.is_error else ToolOutcome(text)


def _result_text(result: Any) -> str:
    """Compact JSON for structured results (unwrapping the SDK's {"result": ...}), else text."""
    data = result.structured_content
    if data is not None and not result.is_error:
        if set(data) == {"result"}:
            data = data["result"]
        return json.dumps(data, ensure_ascii=False)
    return "\n".join(getattr(c, "text", "") for c in result.content)
