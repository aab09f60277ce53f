"""The runtime HTTP API over real HTTP (uvicorn), on the scripted engine."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anyio
import httpx
import pytest
from support.engines import ScriptedEngine, call
from support.serving import serve

from runtime.server import create_app
from tasks.tools import serve_default_tools

SCRIPT = [
    call("load_lora", capability="plan"),
    "Plan: search, then write.\n" + call("offload_lora"),
    call("load_lora", capability="search"),
    call("search", query="capital of France", k=1),
    call("offload_lora"),
    call("load_lora", capability="write"),
    "Paris is the capital of France.",
]
TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    app = create_app(ScriptedEngine(script=SCRIPT), tool_servers=[serve_default_tools()])
    with serve(app) as url:
        yield url


def read_events(client: httpx.Client, url: str) -> list[tuple[str, dict]]:
    """Parse an SSE stream until the server closes it."""
    events, kind = [], None
    with client.stream("GET", url, timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((kind, json.loads(line.removeprefix("data: "))))
    return events


def start(client: httpx.Client, **body) -> str:
    response = client.post("/v1/episodes", json={"task": "Capital of France?", **body})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_episode_streams_events_and_returns_its_trajectory(base) -> None:
    with httpx.Client(base_url=base) as client:
        episode_id = start(client, max_steps=10)
        events = read_events(client, f"/v1/episodes/{episode_id}/events")
        trajectory = client.get(f"/v1/episodes/{episode_id}").json()
    kinds = [k for k, _ in events]
    assert kinds[0] == "start"
    assert kinds[-1] == "done"
    assert [e["seq"] for _, e in events] == list(range(len(events)))
    assert {"token", "tool_call", "tool_result", "switch", "prefetch", "step"} <= set(kinds)
    switches = [(e["from_config"], e["to_config"]) for k, e in events if k == "switch"]
    assert switches[:2] == [(None, "plan"), ("plan", None)]
    assert events[-1][1]["answer"] == "Paris is the capital of France."
    assert trajectory["status"] == "done"
    assert trajectory["loaded"] == ["plan", "search", "write"]
    step = trajectory["steps"][0]
    assert set(step) >= {"active", "prefilled", "decoded", "switch_s", "rebuild_s"}
    assert len(trajectory["switches"]) == 5
    assert trajectory["totals"]["decoded"] > 0


def test_soft_episode_prefetches_the_requested_guess(base) -> None:
    with httpx.Client(base_url=base) as client:
        episode_id = start(client, policy="soft", guesses={"search": "backbone", "plan": "write"})
        events = read_events(client, f"/v1/episodes/{episode_id}/events")
        trajectory = client.get(f"/v1/episodes/{episode_id}").json()
    assert trajectory["policy"] == {"kind": "soft", "guesses": {"search": None, "plan": "write"}}
    # The search call runs with 'search' active; the guess for it is the bare backbone.
    assert [e["config"] for k, e in events if k == "prefetch"] == [None]


def test_events_resume_after_a_sequence_number(base) -> None:
    with httpx.Client(base_url=base) as client:
        episode_id = start(client)
        everything = read_events(client, f"/v1/episodes/{episode_id}/events")
        tail = read_events(client, f"/v1/episodes/{episode_id}/events?after=5")
    assert tail == everything[5:]


def test_metrics_export_switch_and_rebuild_time(base) -> None:
    with httpx.Client(base_url=base) as client:
        episode_id = start(client)
        read_events(client, f"/v1/episodes/{episode_id}/events")
        text = client.get("/metrics").text
    for name in (
        "weact_runtime_switch_seconds_count",
        "weact_runtime_rebuild_seconds_count",
        "weact_runtime_switch_share_count",
        "weact_runtime_rebuild_share_count",
        "weact_runtime_episode_seconds_count",
    ):
        assert name in text
    switches = next(
        line for line in text.splitlines() if line.startswith("weact_runtime_switch_seconds_count")
    )
    assert float(switches.split()[-1]) >= 5


def test_episodes_are_listed(base) -> None:
    with httpx.Client(base_url=base) as client:
        episode_id = start(client)
        read_events(client, f"/v1/episodes/{episode_id}/events")
        listed = client.get("/v1/episodes").json()
    assert {
        "id": episode_id,
        "status": "done",
        "policy": {"kind": "hard", "order": ["plan", "search", "write"]},
    } in listed


def test_healthz(base) -> None:
    response = httpx.get(f"{base}/healthz")
    assert response.json() == {"status": "ok", "adapters": ["plan", "search", "write"]}


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"task": ""}, 422, None),
        ({"task": "x", "policy": "greedy"}, 422, None),
        ({"task": "x", "max_steps": 0}, 422, None),
        ({"task": "x", "order": ["plan", "draw"]}, 422, "invalid"),
        ({"task": "x", "policy": "hard", "order": ["plan", "plan"]}, 422, "invalid"),
        ({"task": "x", "policy": "hard", "guesses": {"plan": "write"}}, 422, "invalid"),
        ({"task": "x", "policy": "soft", "guesses": {"plan": "draw"}}, 422, "invalid"),
    ],
)
def test_bad_episode_requests(base, body, status, code) -> None:
    response = httpx.post(f"{base}/v1/episodes", json=body)
    assert response.status_code == status
    if code:
        assert response.json()["error"] == code


@pytest.mark.parametrize("path", ["/v1/episodes/nope", "/v1/episodes/nope/events"])
def test_unknown_episode_is_404(base, path) -> None:
    response = httpx.get(f"{base}{path}")
    assert response.status_code == 404
    assert response.json() == {"error": "not_found", "detail": "no episode 'nope'"}


@pytest.fixture(scope="module")
def guarded() -> Iterator[str]:
    app = create_app(ScriptedEngine(script=["Hi."]), token=TOKEN)
    with serve(app) as url:
        yield url


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/healthz"),
        ("GET", "/metrics"),
        ("POST", "/v1/episodes"),
        ("GET", "/v1/episodes"),
        ("POST", "/v1/episodes/x/cancel"),
        ("POST", "/mcp"),
    ],
)
@pytest.mark.parametrize("header", [None, "Bearer wrong", f"Basic {TOKEN}"])
def test_token_required_everywhere(guarded, method, path, header) -> None:
    headers = {"Authorization": header} if header else {}
    response = httpx.request(method, f"{guarded}{path}", headers=headers, json={"task": "x"})
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"
    assert response.headers["www-authenticate"] == "Bearer"


def test_token_accepted(guarded) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=guarded, headers=headers) as client:
        assert client.get("/healthz").status_code == 200
        episode_id = start(client, policy="soft")
        events = read_events(client, f"/v1/episodes/{episode_id}/events")
    assert events[-1][1]["answer"] == "Hi."


def test_mcp_with_token(guarded) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
        async with (
            http,
            Client(
                streamable_http_client(f"{guarded}/mcp", http_client=http), mode="legacy"
            ) as client,
        ):
            return await client.call_tool("load_lora", {"capability": "plan"})

    result = anyio.run(main)
    assert not result.is_error
    assert result.structured_content["active"] == "plan"


@pytest.mark.parametrize(
    ("body", "policy"),
    [
        ({}, {"kind": "hard", "order": ["search", "write"]}),
        ({"policy": "hard"}, {"kind": "hard", "order": ["search", "write"]}),
        ({"order": ["plan"]}, {"kind": "hard", "order": ["plan"]}),
        ({"policy": "soft"}, {"kind": "soft", "guesses": {}}),
    ],
)
def test_episode_policy_keeps_the_node_order(body, policy) -> None:
    from runtime.policy import HardPolicy
    from runtime.server.deps import episode_policy
    from runtime.server.schemas import EpisodeCreate

    chosen = episode_policy(
        HardPolicy(("search", "write")),
        EpisodeCreate(task="x", **body),
        ["plan", "search", "write"],
    )
    assert chosen.to_json() == policy
