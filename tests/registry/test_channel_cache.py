"""Channel reads served from memory: ETag/304, invalidation on every write, and no client
ever reading a revision older than one it has seen, in one process and across processes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from harness import World

from registry.services.read_cache import revisions_named


def _head(world: World, **headers: str) -> httpx.Response:
    return world.api.request("GET", "/channels/prod", "reader", headers=headers)


def test_revisions_named_reads_the_channel_s_etags() -> None:
    assert revisions_named("prod", '"prod:3", W/"prod:7", "dev:9", "prod:x", *') == 7
    assert revisions_named("prod", None) == 0
    assert revisions_named("a:b", '"a:b:4"') == 4


def test_etag_round_trip_from_memory(world: World) -> None:
    first = world.promote({"plan": world.approved("plan")["id"]})["revision"]
    answer = _head(world)
    assert (answer.status_code, answer.headers["etag"]) == (200, '"prod:1"')
    assert answer.json() == first
    assert answer.headers["content-type"] == "application/json"
    for _ in range(3):  # served from memory now: still the same answers
        assert _head(world, **{"If-None-Match": '"prod:1"'}).status_code == 304
        assert _head(world).json() == first
    second = world.promote({"write": world.approved("write")["id"]})["revision"]
    changed = _head(world, **{"If-None-Match": '"prod:1"'})
    assert (changed.status_code, changed.headers["etag"]) == (200, '"prod:2"')
    assert changed.json() == second
    unchanged = _head(world, **{"If-None-Match": '"prod:2"'})
    assert (unchanged.status_code, unchanged.headers["etag"], unchanged.content) == (
        304,
        '"prod:2"',
        b"",
    )


def test_rollback_and_revoke_invalidate_the_cached_head(world: World) -> None:
    api = world.api
    plan, write = world.approved("plan", 1), world.approved("write", 2)
    world.promote({"plan": plan["id"]})
    world.promote({"write": write["id"]})
    assert _head(world).json()["revision"] == 2  # cached
    rolled = api.ok("POST", "/channels/prod/rollback", "approver", json={"to_revision": 1})
    assert _head(world).json() == rolled
    assert _head(world, **{"If-None-Match": '"prod:2"'}).json()["revision"] == 3
    revoked = api.request("POST", f"/adapters/{plan['id']}/revoke", "approver", json={})
    assert revoked.status_code == 200
    assert revoked.headers["x-weact-channel-revisions"] == "prod=4"
    head = _head(world, **{"If-None-Match": '"prod:3"'}).json()
    assert (head["revision"], head["library"]) == (4, {})  # revoke still moves the head
    again = api.request("POST", f"/adapters/{write['id']}/revoke", "approver", json={})
    assert again.headers["x-weact-channel-revisions"] == ""  # write@1 no longer served


def test_a_client_s_min_revision_reads_past_a_stale_cache(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write whose notification never arrives (another process, slower than the client):
    the cache may still hold the old head, but not for a client that saw the new one."""
    api = world.api
    world.promote({"plan": world.approved("plan", 1)["id"]})
    assert _head(world).json()["revision"] == 1  # cached
    write = world.approved("write", 2)
    state = api.client.app.state.weact  # type: ignore[attr-defined]
    monkeypatch.setattr(state.notifier, "notify", lambda: None)
    assert world.promote({"write": write["id"]})["revision"]["revision"] == 2
    plain = _head(world).json()["revision"]
    # PostgreSQL heard nothing, so memory still says 1; SQLite sees the commit itself
    assert plain == (2 if state.db.is_sqlite else 1)
    assert _head(world, **{"X-Weact-Min-Revision": "2"}).json()["revision"] == 2
    assert _head(world, **{"If-None-Match": '"prod:2"'}).status_code == 304
    assert _head(world, **{"X-Weact-Min-Revision": "9"}).json()["revision"] == 2
    bad = _head(world, **{"X-Weact-Min-Revision": "-1"})
    assert (bad.status_code, bad.json()["error"]) == (422, "invalid")


def test_resolve_still_authenticates_every_request(world: World) -> None:
    world.promote({"plan": world.approved("plan")["id"]})
    assert _head(world).status_code == 200
    for headers in ({}, {"Authorization": "Bearer nope"}):
        response = world.api.client.get("/v1/channels/prod", headers=headers)
        assert (response.status_code, response.json()["error"]) == (401, "unauthorized")
    missing = world.api.request("GET", "/channels/nothing", "reader")
    assert missing.status_code == 404
    assert json.loads(missing.content)["error"] == "not_found"


def test_cache_off_still_serves(tmp_path: Path, sqlite_template: Path) -> None:
    import shutil

    from harness import build_harness, make_world

    path = tmp_path / "registry.db"
    shutil.copyfile(sqlite_template, path)
    harness = build_harness(
        f"sqlite:///{path}",
        str(tmp_path / "blobs"),
        tmp_path,
        channel_cache_ttl_s=0,
        token_cache_ttl_s=0,
    )
    api = next(harness)
    try:
        world = make_world(api)
        world.promote({"plan": world.approved("plan")["id"]})
        assert _head(world).json()["revision"] == 1
        assert _head(world, **{"If-None-Match": '"prod:1"'}).status_code == 304
    finally:
        next(harness, None)


def test_the_client_remembers_what_it_saw(world: World) -> None:
    from registry.client import RegistryClient

    api = world.api
    plan, write = world.approved("plan", 1), world.approved("write", 2)
    sent: list[httpx.Request] = []

    class Recording(httpx.BaseTransport):  # into the in-process app, keeping each request
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            sent.append(request)
            answer = api.client.request(
                request.method, str(request.url), headers=request.headers, content=request.read()
            )
            return httpx.Response(
                answer.status_code, headers=answer.headers, content=answer.content
            )

    client = RegistryClient("http://testserver", api.tokens["approver"], transport=Recording())
    promoted = client.promote("prod", {"plan": plan["id"]}, backbone=world.backbone, create=True)
    assert client.seen.highest("prod") == 1
    first = client.get_channel("prod")
    assert first == promoted["revision"]
    assert sent[-1].headers["x-weact-min-revision"] == "1"
    again = client.get_channel("prod")  # answered 304: the remembered revision
    assert sent[-1].headers["if-none-match"] == '"prod:1"'
    assert again == first
    client.promote("prod", {"write": write["id"]})
    client.revoke(plan["id"])
    assert client.seen.highest("prod") == 3  # from the revoke's X-Weact-Channel-Revisions
    head = client.get_channel("prod")
    assert (head["revision"], set(head["library"])) == (3, {"write"})
    assert [r["revision"] for r in client.list_channels()] == [3]
    client.close()


def test_a_token_revoked_through_the_server_is_refused_at_once(world: World) -> None:
    api = world.api
    state = api.client.app.state.weact  # type: ignore[attr-defined]
    deadline = time.monotonic() + 10
    while not (state.db.is_sqlite or state.token_changes.cross_process):
        assert time.monotonic() < deadline, "the PostgreSQL listener never connected"
        time.sleep(0.02)  # until it did: tokens are cached from then on, and it woke all
    made = api.ok("POST", "/tokens", json={"name": "temp", "role": "reader"})
    api.tokens["temp"] = made["token"]
    for _ in range(3):  # the token is cached now
        assert api.request("GET", "/adapters", "temp").status_code == 200
    wakes = state.notifier.generation
    api.ok("POST", f"/tokens/{made['id']}/revoke")
    assert api.request("GET", "/adapters", "temp").status_code == 401
    assert state.notifier.generation == wakes  # its own notification: no long-poll wakes
