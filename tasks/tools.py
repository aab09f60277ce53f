"""The task world's external tools, served over MCP: `search`, `fetch_document`, `calculate`.

One server for every user: the runtime's built-in tools (`weact runtime serve --kb`, the
demo) serve it over the default world's index, an evaluation run over its suite's index.
`TOOL_SCHEMAS` is what the model is shown, in the OpenAI `tools` shape the chat template
renders; the gold trajectories carry exactly these, and a test checks that the MCP server
lists the same, so a trained adapter sees at evaluation the context it was trained on.
`python -m tasks.tools` serves the default world's tools over stdio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tasks.calc import calculate
from tasks.errors import TaskError
from tasks.research import default_world
from tasks.search import DEFAULT_K, SearchIndex

if TYPE_CHECKING:
    from mcp.server import MCPServer

SEARCH_DESCRIPTION = "Search the knowledge base."
FETCH_DESCRIPTION = "Fetch a document by id."
CALCULATE_DESCRIPTION = "Evaluate arithmetic, e.g. 1987 - 1942."

TOOL_SCHEMAS: tuple[dict[str, Any], ...] = (
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": SEARCH_DESCRIPTION,
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "k": {"type": "integer", "default": DEFAULT_K},
                },
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "fetch_document",
            "description": FETCH_DESCRIPTION,
            "parameters": {
                "type": "object",
                "properties": {"id": {"type": "string"}},
                "required": ["id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "calculate",
            "description": CALCULATE_DESCRIPTION,
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    },
)


def plain_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """An MCP input schema without the titles pydantic adds (what `TOOL_SCHEMAS` shows)."""
    if isinstance(schema, dict):
        return {k: plain_schema(v) for k, v in schema.items() if k != "title"}
    return schema


def serve_tools(index: SearchIndex) -> MCPServer:
    """An MCP server with `search`, `fetch_document` and `calculate` over `index`."""
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server: MCPServer = MCPServer("weact-tasks", instructions="Search a fictional knowledge base.")

    def guarded(fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except (TaskError, ValueError) as exc:
                raise ToolError(str(exc)) from exc

        return call

    def search(query: str, k: int = DEFAULT_K) -> list[dict[str, Any]]:
        return guarded(index.search)(query, k)  # type: ignore[no-any-return]

    def fetch_document(id: str) -> dict[str, Any]:  # noqa: A002 - the tool's argument name
        return guarded(index.fetch)(id)  # type: ignore[no-any-return]

    def calculate_tool(expression: str) -> dict[str, Any]:
        return {"value": guarded(calculate)(expression)}

    server.add_tool(search, name="search", description=SEARCH_DESCRIPTION)
    server.add_tool(fetch_document, name="fetch_document", description=FETCH_DESCRIPTION)
    server.add_tool(calculate_tool, name="calculate", description=CALCULATE_DESCRIPTION)
    return server


def serve_default_tools() -> MCPServer:
    """The tools over the default world (`tasks.research.default_world`)."""
    return serve_tools(default_world().index)


if __name__ == "__main__":  # pragma: no cover - exercised through a subprocess
    serve_default_tools().run("stdio")
