"""load_lora / offload_lora over MCP for older clients: stdio, legacy sessions, `_meta` names.

The standard (2026-07-28) path, episode handles passed as tool arguments, is in
test_mcp_handles.py.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import anyio
import pytest
from mcp import Client, StdioServerParameters
from support.engines import ScriptedEngine
from support.mcp_stdio import stdio_parameters
from support.serving import serve

from runtime.mcp_server import EPISODE_META_KEY
from runtime.policy import SoftPolicy
from runtime.server import create_app


async def exercise(client: Client) -> list[tuple[bool, str]]:
    """The tool semantics as a client sees them: (is_error, text) per call."""
    calls = [
        ("load_lora", {"capability": "plan"}),
        ("load_lora", {"capability": "write"}),
        ("offload_lora", {}),
        ("offload_lora", {}),
        ("load_lora", {"capability": "code"}),
    ]
    out = []
    for name, args in calls:
        result = await client.call_tool(name, args)
        out.append((result.is_error, result.content[0].text))
    return out


def check_semantics(results: list[tuple[bool, str]]) -> None:
    assert [err for err, _ in results] == [False, True, False, True, True]
    assert '"active": "plan"' in results[0][1]
    assert "call offload_lora before loading 'write'" in results[1][1]
    assert '"active": null' in results[2][1]
    assert "nothing to offload" in results[3][1]
    assert "available: plan, search, write" in results[4][1]


async def tool_list(client: Client) -> dict[str, str]:
    return {t.name: t.description or "" for t in (await client.list_tools()).tools}


def test_stdio() -> None:
    params = stdio_parameters()

    async def main():
        async with Client(params) as client:
            return await tool_list(client), await exercise(client)

    tools, results = anyio.run(main)
    assert set(tools) == {"open_episode", "load_lora", "offload_lora", "close_episode"}
    assert "search: Query the knowledge base" in tools["load_lora"]
    check_semantics(results)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    app = create_app(ScriptedEngine(), policy=SoftPolicy())
    with serve(app) as base:
        yield f"{base}/mcp"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_streamable_http(url, mode) -> None:
    meta = {EPISODE_META_KEY: f"semantics-{mode}"} if mode == "auto" else None

    async def main():
        async with Client(url, mode=mode) as client:
            if meta is None:
                return await exercise(client)
            return await exercise(_Named(client, meta))

    check_semantics(anyio.run(main))


class _Named:
    """A client whose calls name their episode (2026-07-28 requests carry no session)."""

    def __init__(self, client: Client, meta: dict) -> None:
        self.client, self.meta = client, meta

    async def call_tool(self, name: str, args: dict):
        return await self.client.call_tool(name, args, meta=self.meta)


def test_stateless_request_without_an_episode_is_refused(url) -> None:
    async def main():
        async with Client(url, mode="auto") as client:
            return await client.call_tool("load_lora", {"capability": "plan"})

    result = anyio.run(main)
    assert result.is_error
    assert "call open_episode first" in result.content[0].text


def episode_of(result) -> str:
    return result.structured_content["episode_id"]


def test_two_interleaved_sessions_never_see_each_other(url) -> None:
    async def main():
        async with Client(url, mode="legacy") as a, Client(url, mode="legacy") as b:
            steps = [
                await a.call_tool("load_lora", {"capability": "plan"}),
                await b.call_tool("offload_lora", {}),  # b has nothing active
                await b.call_tool("load_lora", {"capability": "write"}),  # not blocked by a
                await a.call_tool("load_lora", {"capability": "search"}),  # a still has plan
                await a.call_tool("offload_lora", {}),
                await b.call_tool("load_lora", {"capability": "plan"}),  # b still has write
                await b.call_tool("offload_lora", {}),
            ]
            return steps

    a1, b1, b2, a2, a3, b3, b4 = anyio.run(main)
    assert [r.is_error for r in (a1, b1, b2, a2, a3, b3, b4)] == [
        False,
        True,
        False,
        True,
        False,
        True,
        False,
    ]
    assert "'plan' is active" in a2.content[0].text
    assert "'write' is active" in b3.content[0].text
    assert episode_of(a1) == episode_of(a3)
    assert episode_of(b2) == episode_of(b4)
    assert episode_of(a1) != episode_of(b2)


def test_an_mcp_episode_is_visible_in_the_http_api(url) -> None:
    import httpx

    async def main():
        async with Client(url, mode="legacy") as client:
            await client.call_tool("load_lora", {"capability": "search"})
            result = await client.call_tool("load_lora", {"capability": "plan"})
            return result, episode_of(await client.call_tool("offload_lora", {}))

    refused, episode_id = anyio.run(main)
    assert refused.is_error
    base = url.removesuffix("/mcp")
    trajectory = httpx.get(f"{base}/v1/episodes/{episode_id}").json()
    assert trajectory["active"] is None
    assert trajectory["loaded"] == ["search"]
    assert [(s["from"], s["to"]) for s in trajectory["switches"]] == [
        (None, "search"),
        ("search", None),
    ]
    kinds = []
    with httpx.stream("GET", f"{base}/v1/episodes/{episode_id}/events") as stream:
        for line in stream.iter_lines():
            if line.startswith("data: "):
                kinds.append(json.loads(line[6:])["type"])
            if len(kinds) == 6:
                break  # an MCP episode stays open: stop reading after its six events
    assert kinds == ["tool_call", "tool_result"] * 3


def test_concurrent_named_episodes(url) -> None:
    """Many stateless clients at once, each naming its own episode."""
    outcomes: dict[str, list[bool]] = {}

    async def one(name: str, capability: str) -> None:
        async with Client(url) as client:
            meta = {EPISODE_META_KEY: name}
            seen = []
            for tool, args in [
                ("load_lora", {"capability": capability}),
                ("load_lora", {"capability": capability}),
                ("offload_lora", {}),
            ]:
                seen.append((await client.call_tool(tool, args, meta=meta)).is_error)
            outcomes[name] = seen

    async def main():
        async with anyio.create_task_group() as tg:
            for i, cap in enumerate(["plan", "search", "write", "plan"]):
                tg.start_soon(one, f"concurrent-{i}", cap)

    anyio.run(main)
    assert outcomes == {f"concurrent-{i}": [False, True, False] for i in range(4)}


@pytest.fixture(scope="module")
def kb_url() -> Iterator[str]:
    from tasks.tools import serve_default_tools

    with serve(serve_default_tools().streamable_http_app()) as base:
        yield f"{base}/mcp"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_external_tools_over_each_transport(transport, request) -> None:
    """The agent's toolbox reaches an external MCP tool server over stdio and HTTP."""
    from runtime.mcp_client import McpToolbox
    from tasks.research import default_world

    city = next(d for d in default_world().documents if "-city-" in d.entity)

    if transport == "stdio":
        target = StdioServerParameters(command=sys.executable, args=["-m", "tasks.tools"])
    else:
        target = request.getfixturevalue("kb_url")

    async def main():
        async with McpToolbox([target]) as box:
            found = await box.call("search", {"query": city.title, "k": 1})
            refused = await box.call("search", {"query": "x", "k": 0})
            missing = await box.call("search", {"k": 1})
            return box.schemas(), found, refused, missing

    schemas, found, refused, missing = anyio.run(main)
    assert [s["function"]["name"] for s in schemas] == ["search", "fetch_document", "calculate"]
    assert schemas[0]["function"]["parameters"]["required"] == ["query"]
    assert not found.is_error
    assert json.loads(found.content)[0]["id"] == city.id
    assert refused.is_error
    assert "k must be" in refused.message
    assert missing.is_error


@pytest.mark.parametrize("clash", ["load_lora", "search"])
def test_toolbox_refuses_clashing_tool_names(clash) -> None:
    from runtime.episode import EpisodeManager
    from runtime.errors import ToolConflictError
    from runtime.mcp_client import McpToolbox
    from runtime.mcp_server import build_mcp_server
    from tasks.tools import serve_default_tools

    if clash == "load_lora":
        servers = [build_mcp_server(EpisodeManager(ScriptedEngine()))]
    else:
        servers = [serve_default_tools(), serve_default_tools()]

    async def main():
        async with McpToolbox(servers):
            pass

    with pytest.raises(ToolConflictError, match=f"'{clash}'"):
        anyio.run(main)


@pytest.mark.slow
def test_weact_runtime_mcp_over_stdio_on_the_tiny_model(tiny_backbone, tiny_adapters) -> None:
    """`weact runtime mcp` serves the real engine's adapters to a stdio client."""
    adapters = [a for n, p in tiny_adapters.items() for a in ("--adapter", f"{n}={p}")]
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-c",
            "from cli.main import main; main()",
            "runtime",
            "mcp",
            "--backbone",
            str(tiny_backbone),
            "--policy",
            "soft",
            *adapters,
        ],
    )

    async def main():
        async with Client(params) as client:
            return await exercise(client)

    check_semantics(anyio.run(main))
