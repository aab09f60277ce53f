"""Episode handles over MCP (revision 2026-07-28): a stock `mcp.Client` in its default mode.

No test here sends a custom `_meta` or opens a protocol session: the episode travels as the
`episode` argument, the handle `open_episode` returned, as the revision prescribes.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio
import httpx
import pytest
from mcp import Client
from support.engines import ScriptedEngine
from support.serving import serve

from runtime.policy import SoftPolicy
from runtime.server import create_app

TOKEN_A, TOKEN_B = "token-of-client-a", "token-of-client-b"
AUTH_A = {"Authorization": f"Bearer {TOKEN_A}"}


@pytest.fixture(scope="module")
def node() -> Iterator[str]:
    app = create_app(ScriptedEngine(), policy=SoftPolicy(), token=[TOKEN_A, TOKEN_B])
    with serve(app) as base:
        yield base


@asynccontextmanager
async def connect(base: str, token: str = TOKEN_A) -> AsyncIterator[Client]:
    """The official client in its default mode, with a bearer token and nothing else."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
        yield client


async def call(client: Client, name: str, **arguments: object) -> tuple[bool, dict | str]:
    """(is_error, structured result or error text) of one tool call."""
    result = await client.call_tool(name, arguments)
    if result.is_error:
        return True, result.content[0].text
    return False, result.structured_content


async def open_episode(client: Client) -> dict:
    error, opened = await call(client, "open_episode")
    assert not error, opened
    return opened


def test_the_default_client_is_stateless_and_told_to_open_an_episode(node) -> None:
    async def main():
        async with connect(node) as client:
            return await call(client, "load_lora", capability="plan")

    error, text = anyio.run(main)
    assert error
    assert "call open_episode first" in text
    assert "`episode` argument" in text


def test_tools_tell_a_model_how_to_use_the_handle(node) -> None:
    async def main():
        async with connect(node) as client:
            return {t.name: t for t in (await client.list_tools()).tools}

    tools = anyio.run(main)
    assert set(tools) == {"open_episode", "load_lora", "offload_lora", "close_episode"}
    assert "secret handle" in tools["open_episode"].description
    assert "`episode` argument of load_lora" in tools["open_episode"].description
    load = tools["load_lora"]
    assert "search: Query the knowledge base" in load.description
    assert "handle open_episode returned" in load.description
    assert set(load.input_schema["properties"]) == {"capability", "episode"}
    assert load.input_schema["required"] == ["capability"]
    assert tools["close_episode"].input_schema["required"] == ["episode"]
    assert "handle open_episode returned" in tools["offload_lora"].description


def test_open_load_offload_close(node) -> None:
    async def main():
        async with connect(node) as client:
            opened = await open_episode(client)
            handle = opened["episode"]
            steps = [
                await call(client, "load_lora", episode=handle, capability="plan"),
                await call(client, "load_lora", episode=handle, capability="write"),
                await call(client, "offload_lora", episode=handle),
                await call(client, "offload_lora", episode=handle),
                await call(client, "load_lora", episode=handle, capability="code"),
            ]
            trajectory = httpx.get(f"{node}/v1/episodes/{opened['episode_id']}", headers=AUTH_A)
            closed = await call(client, "close_episode", episode=handle)
            after = await call(client, "load_lora", episode=handle, capability="plan")
            return opened, steps, trajectory.json(), closed, after

    opened, steps, trajectory, closed, after = anyio.run(main)
    assert opened["capabilities"].keys() == {"plan", "search", "write"}
    assert opened["revision"] is None  # no channel follower behind this node
    assert opened["active"] is None
    assert len(opened["episode"]) >= 40
    assert opened["episode_id"] not in opened["episode"]
    assert [error for error, _ in steps] == [False, True, False, True, True]
    assert steps[0][1]["active"] == "plan"
    assert steps[0][1]["episode_id"] == opened["episode_id"]
    assert "call offload_lora before loading 'write'" in steps[1][1]
    assert steps[2][1]["active"] is None
    assert "nothing to offload" in steps[3][1]
    assert "'code' is unavailable" in steps[4][1]
    assert "available: plan, search, write" in steps[4][1]
    assert trajectory["loaded"] == ["plan"]
    assert closed == (False, {"closed": True, "episode_id": opened["episode_id"]})
    assert after[0]
    assert "unknown or expired episode handle" in after[1]
    gone = httpx.get(f"{node}/v1/episodes/{opened['episode_id']}", headers=AUTH_A)
    assert gone.status_code == 404


def test_two_episodes_at_once_never_see_each_other(node) -> None:
    """Two handles on one connection and one on another, their calls interleaved."""

    async def main():
        async with connect(node) as one, connect(node) as other:
            a = (await open_episode(one))["episode"]
            b = (await open_episode(one))["episode"]
            c = (await open_episode(other))["episode"]
            return [
                await call(one, "load_lora", episode=a, capability="plan"),
                await call(one, "offload_lora", episode=b),  # b has nothing active
                await call(one, "load_lora", episode=b, capability="write"),  # not blocked by a
                await call(other, "load_lora", episode=c, capability="search"),
                await call(one, "load_lora", episode=a, capability="search"),  # a still has plan
                await call(other, "offload_lora", episode=c),
                await call(one, "offload_lora", episode=a),
                await call(one, "load_lora", episode=b, capability="plan"),  # b still has write
            ]

    steps = anyio.run(main)
    assert [error for error, _ in steps] == [False, True, False, False, True, False, False, True]
    assert "'plan' is active" in steps[4][1]
    assert "'write' is active" in steps[7][1]
    ids = {steps[0][1]["episode_id"], steps[2][1]["episode_id"], steps[3][1]["episode_id"]}
    assert len(ids) == 3


def test_concurrent_episodes_from_many_clients(node) -> None:
    outcomes: dict[int, list[bool]] = {}

    async def one(i: int, capability: str) -> None:
        async with connect(node, TOKEN_A if i % 2 else TOKEN_B) as client:
            handle = (await open_episode(client))["episode"]
            seen = []
            for name, args in [
                ("load_lora", {"capability": capability}),
                ("load_lora", {"capability": capability}),
                ("offload_lora", {}),
            ]:
                seen.append((await call(client, name, episode=handle, **args))[0])
            outcomes[i] = seen

    async def main():
        async with anyio.create_task_group() as tg:
            for i, capability in enumerate(["plan", "search", "write", "plan", "search"]):
                tg.start_soon(one, i, capability)

    anyio.run(main)
    assert outcomes == {i: [False, True, False] for i in range(5)}


def test_a_handle_from_another_token_is_refused(node) -> None:
    async def main():
        async with connect(node, TOKEN_A) as owner, connect(node, TOKEN_B) as intruder:
            handle = (await open_episode(owner))["episode"]
            return [
                await call(intruder, "load_lora", episode=handle, capability="plan"),
                await call(intruder, "offload_lora", episode=handle),
                await call(intruder, "close_episode", episode=handle),
                await call(owner, "load_lora", episode=handle, capability="search"),
            ]

    steps = anyio.run(main)
    assert [error for error, _ in steps] == [True, True, True, False]
    for _, text in steps[:3]:
        assert "opened with other credentials" in text
    assert steps[3][1]["active"] == "search"  # the intruder changed nothing


def test_a_guessed_handle_is_refused(node) -> None:
    async def main():
        async with connect(node) as client:
            opened = await open_episode(client)
            guesses = [secrets.token_urlsafe(32), opened["episode_id"], opened["episode"][:-1]]
            return [await call(client, "offload_lora", episode=g) for g in guesses]

    for error, text in anyio.run(main):
        assert error
        assert "unknown or expired episode handle" in text


def test_an_idle_handle_expires_and_its_episode_closes() -> None:
    app = create_app(ScriptedEngine(), policy=SoftPolicy(), handle_idle_s=0.4)
    with serve(app) as base:

        async def opened():
            async with connect(base) as client:
                handle = (await open_episode(client))["episode"]
                loaded = await call(client, "load_lora", episode=handle, capability="plan")
                return handle, loaded[1]["episode_id"]

        handle, episode_id = anyio.run(opened)
        deadline = time.monotonic() + 10
        bearer = {"Authorization": f"Bearer {TOKEN_A}"}  # the episode is its opener's alone
        while httpx.get(f"{base}/v1/episodes/{episode_id}", headers=bearer).status_code != 404:
            assert time.monotonic() < deadline, "the idle episode was never closed"
            time.sleep(0.1)

        async def reuse():
            async with connect(base) as client:
                return await call(client, "offload_lora", episode=handle)

        error, text = anyio.run(reuse)
    assert error
    assert "unknown or expired episode handle" in text


class PinnedSource:
    """A library source standing in for a channel follower: a fixed revision, counted releases."""

    def __init__(self, revision: int) -> None:
        self.revision = revision
        self.released = 0

    @contextmanager
    def pinned(self) -> Iterator[int]:
        yield self.revision

    def health(self) -> dict:
        return {"revision": self.revision, "stale": True, "audit_ok": True}

    def release(self) -> list[str]:
        self.released += 1
        return []


def test_an_episode_is_pinned_to_the_sources_revision_and_its_close_frees_weights() -> None:
    source = PinnedSource(7)
    app = create_app(ScriptedEngine(), policy=SoftPolicy(), source=source)
    with serve(app) as base:

        async def main():
            async with connect(base) as client:
                opened = await open_episode(client)
                closed = await call(client, "close_episode", episode=opened["episode"])
                return opened, closed

        opened, closed = anyio.run(main)
        trajectory_gone = httpx.get(f"{base}/v1/episodes/{opened['episode_id']}").status_code
        health = httpx.get(f"{base}/healthz").json()
    assert opened["revision"] == 7
    assert closed[0] is False
    assert trajectory_gone == 404
    assert source.released == 1
    assert health["status"] == "stale"
    assert health["library"]["revision"] == 7


def test_a_finished_agent_episode_frees_its_weights() -> None:
    """Agent episodes over HTTP: once done, the engine session closes and weights are freed."""
    source = PinnedSource(3)
    engine = ScriptedEngine(script=["Hi."])
    app = create_app(engine, policy=SoftPolicy(), source=source)
    with serve(app) as base:
        created = httpx.post(f"{base}/v1/episodes", json={"task": "greet"}).json()
        deadline = time.monotonic() + 20
        while httpx.get(f"{base}/v1/episodes/{created['id']}").json()["status"] != "done":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        trajectory = httpx.get(f"{base}/v1/episodes/{created['id']}").json()
        deadline = time.monotonic() + 5
        while source.released < 1:  # the close runs right after the episode is marked done
            assert time.monotonic() < deadline
            time.sleep(0.02)
    assert trajectory["revision"] == 3
    assert trajectory["answer"] == "Hi."
    assert engine.sessions[-1].closed
