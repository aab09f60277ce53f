"""Node episodes belong to their token, over real HTTP (uvicorn) on the scripted engine.

Two client tokens and an admin token: a client lists, reads, follows and cancels only the
episodes it started (a foreign one answers 404 exactly as an unknown id does); the admin
sees and cancels all; /livez answers without any token and says nothing else.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from support.engines import ScriptedEngine, call
from support.serving import serve

from runtime.engine import EngineSession
from runtime.server import create_app

A, B, ADMIN = "token-a", "token-b", "token-admin"


def busy(session: EngineSession) -> str:
    """Never answers: a tool call per step (a refused offload), so an episode runs until
    cancelled (or its step budget ends)."""
    time.sleep(0.02)
    return call("offload_lora")


@pytest.fixture(scope="module")
def node() -> Iterator[str]:
    app = create_app(ScriptedEngine(script=busy), token=[A, B], admin_token=ADMIN)
    with serve(app) as url:
        yield url


def client(base: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def start(http: httpx.Client) -> str:
    response = http.post("/v1/episodes", json={"task": "Capital of France?", "max_steps": 1000})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def listed(http: httpx.Client) -> set[str]:
    response = http.get("/v1/episodes")
    assert response.status_code == 200, response.text
    return {e["id"] for e in response.json()}


def not_found(response: httpx.Response, episode_id: str) -> None:
    assert response.status_code == 404, response.text
    assert response.json() == {"error": "not_found", "detail": f"no episode {episode_id!r}"}


def done_event(http: httpx.Client, episode_id: str) -> dict[str, object]:
    """The last event of the episode's SSE stream (read until the server closes it)."""
    last: dict[str, object] = {}
    with http.stream("GET", f"/v1/episodes/{episode_id}/events") as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: "):
                last = json.loads(line.removeprefix("data: "))
    return last


def test_a_foreign_episode_is_as_unknown_as_a_missing_one(node) -> None:
    with client(node, A) as a, client(node, B) as b:
        mine = start(a)
        theirs = start(b)
        assert mine in listed(a)
        assert theirs not in listed(a)
        assert theirs in listed(b)
        assert mine not in listed(b)
        not_found(b.get(f"/v1/episodes/{mine}"), mine)
        not_found(b.get(f"/v1/episodes/{mine}/events"), mine)
        not_found(b.post(f"/v1/episodes/{mine}/cancel"), mine)
        # B's refused cancel left A's episode running; A's own cancel stops it
        shown = a.get(f"/v1/episodes/{mine}").json()
        assert (shown["status"], shown["task"]) == ("running", "Capital of France?")
        cancelled = a.post(f"/v1/episodes/{mine}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["status"] == "cancelled"
        last = done_event(a, mine)
        assert (last["type"], last["status"]) == ("done", "cancelled")
        assert last["error"] == "cancelled by its client"
        assert b.post(f"/v1/episodes/{theirs}/cancel").json()["status"] == "cancelled"


def test_the_admin_sees_and_cancels_every_episode(node) -> None:
    with client(node, A) as a, client(node, B) as b, client(node, ADMIN) as admin:
        of_a, of_b = start(a), start(b)
        assert {of_a, of_b} <= listed(admin)
        for episode_id in (of_a, of_b):
            assert admin.get(f"/v1/episodes/{episode_id}").json()["status"] == "running"
            assert admin.post(f"/v1/episodes/{episode_id}/cancel").json()["status"] == "cancelled"
        assert a.get(f"/v1/episodes/{of_a}").json()["status"] == "cancelled"
        assert done_event(b, of_b)["error"] == "cancelled by its client"
        # an episode that no longer runs is left as it is
        again = admin.post(f"/v1/episodes/{of_a}/cancel")
        assert again.status_code == 200
        assert again.json()["status"] == "cancelled"


def test_livez_answers_without_a_token_and_nothing_else(node) -> None:
    response = httpx.get(f"{node}/livez")
    assert response.status_code == 200
    assert response.json() == {"status": "alive"}
    assert httpx.get(f"{node}/healthz").status_code == 401
    assert httpx.get(f"{node}/v1/episodes").status_code == 401
    assert httpx.post(f"{node}/v1/episodes", json={"task": "x"}).status_code == 401
