"""The suite's external tools, served over MCP: `search`, `fetch_document`, `calculate`.

`TOOL_SCHEMAS` is what the model is shown, in the OpenAI `tools` shape the chat template
renders; the gold trajectories carry exactly these, and a test checks that the MCP server
lists the same, so a trained adapter sees at evaluation the context it was trained on.
`python -m evals.tools SUITE_DIR` serves a suite's tools over stdio.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from evals.calc import calculate
from evals.errors import EvalError
from evals.search import DEFAULT_K, SearchIndex

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


def serve_suite_tools(index: SearchIndex) -> MCPServer:
    """An MCP server with `search`, `fetch_document` and `calculate` over `index`."""
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server: MCPServer = MCPServer("weact-bench", instructions="Search a fictional knowledge base.")

    def guarded(fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except (EvalError, ValueError) as exc:
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


def main(argv: list[str] | None = None) -> None:  # pragma: no cover - a subprocess entry
    from evals.suite import load_suite

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m evals.tools SUITE_DIR")
    serve_suite_tools(load_suite(args[0]).index()).run("stdio")


if __name__ == "__main__":  # pragma: no cover
    main()
