"""Channels: promote, ETag/304, long-poll, history, rollback, revoke; on both databases."""

from __future__ import annotations

import hashlib
import json
import threading
import time

from harness import World


def _digest(backbone: str, library: dict[str, dict[str, object]], order: list[str]) -> str:
    roots = {cap: entry["manifest_root"] for cap, entry in library.items()}
    body = json.dumps(
        {"backbone": backbone, "library": roots, "order": order},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(body.encode()).hexdigest()


def test_promote_builds_revisions_with_library_digest(world: World) -> None:
    api = world.api
    plan, write = world.approved("plan", 1), world.approved("write", 2)
    first = world.promote({"plan": plan["id"]}, order=["plan"])
    assert first["revision"]["revision"] == 1
    assert (first["gate"]["passed"], first["gate"]["checks"]) == (True, [])
    assert first["gate"]["library_digest"] == first["revision"]["library_digest"]
    second = world.promote({"write": write["id"]}, order=["plan", "write"])["revision"]
    assert second["revision"] == 2
    assert set(second["library"]) == {"plan", "write"}
    assert second["library"]["write"]["name"] == "write@1"
    assert second["library"]["write"]["files"] == write["files"]
    assert second["order"] == ["plan", "write"]
    assert second["library_digest"] == _digest(world.backbone, second["library"], second["order"])
    assert api.ok("GET", "/channels/prod", "node") == second
    history = api.ok("GET", "/channels/prod/revisions", "reader")
    assert [r["revision"] for r in history] == [1, 2]
    assert [c["channel"] for c in api.ok("GET", "/channels", "reader")] == ["prod"]
    removed = world.promote({"plan": None}, order=["write"])["revision"]
    assert set(removed["library"]) == {"write"}


def test_etag_and_if_none_match(world: World) -> None:
    api = world.api
    world.promote({"plan": world.approved("plan")["id"]})
    response = api.request("GET", "/channels/prod", "reader")
    assert response.headers["etag"] == '"prod:1"'
    cached = api.request("GET", "/channels/prod", "reader", headers={"If-None-Match": '"prod:1"'})
    assert cached.status_code == 304
    stale = api.request("GET", "/channels/prod", "reader", headers={"If-None-Match": '"prod:0"'})
    assert stale.status_code == 200


def test_long_poll_returns_when_revision_passes(world: World) -> None:
    api = world.api
    world.promote({"plan": world.approved("plan")["id"]})
    write = world.approved("write")
    timer = threading.Timer(0.3, lambda: world.promote({"write": write["id"]}))
    start = time.monotonic()
    timer.start()
    try:
        response = api.request("GET", "/channels/prod?after=1&wait=10", "node")
    finally:
        timer.join()
    assert response.status_code == 200
    assert response.json()["revision"] == 2
    assert time.monotonic() - start < 5
    immediate = api.request("GET", "/channels/prod?after=0&wait=10", "node")
    assert immediate.json()["revision"] == 2


def test_long_poll_times_out_with_304(world: World) -> None:
    world.promote({"plan": world.approved("plan")["id"]})
    start = time.monotonic()
    response = world.api.request("GET", "/channels/prod?after=1&wait=0.3", "node")
    assert response.status_code == 304
    assert 0.25 <= time.monotonic() - start < 3
    world.api.fails(404, "not_found", "GET", "/channels/nope?after=0&wait=0.1", "node")


def test_promote_only_approved_adapters_of_the_backbone(world: World) -> None:
    api = world.api
    candidate = world.adapter("plan", 1)
    before = api.counts()
    body = {"backbone": world.backbone, "adapters": {"plan": candidate["id"]}, "create": True}
    api.fails(409, "invalid_state", "POST", "/channels/prod/promote", "approver", json=body)
    body["adapters"] = {"write": candidate["id"]}
    api.fails(422, "invalid", "POST", "/channels/prod/promote", "approver", json=body)
    other = api.backbone("other", seed=9)["root"]
    foreign = api.adapter("plan", other, seed=2)
    api.ok("POST", f"/adapters/{foreign['id']}/approve", "approver", json={})
    before = api.counts()
    body["adapters"] = {"plan": foreign["id"]}
    api.fails(422, "incompatible_adapter", "POST", "/channels/prod/promote", "approver", json=body)
    assert api.counts() == before


def test_expected_revision_conflict(world: World) -> None:
    api = world.api
    plan, write = world.approved("plan"), world.approved("write")
    world.promote({"plan": plan["id"]}, expected_revision=0)
    before = api.counts()
    body = {"adapters": {"write": write["id"]}, "expected_revision": 0}
    detail = api.fails(
        409, "revision_conflict", "POST", "/channels/prod/promote", "approver", json=body
    )
    assert detail["current_revision"] == 1
    assert api.counts() == before
    body["expected_revision"] = 1
    assert (
        api.ok("POST", "/channels/prod/promote", "approver", json=body)["revision"]["revision"] == 2
    )


def test_rollback_appends_an_equal_revision(world: World) -> None:
    api = world.api
    v1, v2 = world.approved("write", 1), world.approved("write", 2)
    first = world.promote({"write": v1["id"]})["revision"]
    world.promote({"write": v2["id"]})
    back = api.ok(
        "POST",
        "/channels/prod/rollback",
        "approver",
        json={"to_revision": 1, "expected_revision": 2},
    )
    assert back["revision"] == 3
    assert back["library"] == first["library"]
    assert back["library_digest"] == first["library_digest"]
    assert back["reason"] == "rollback to revision 1"
    api.fails(
        422, "invalid", "POST", "/channels/prod/rollback", "approver", json={"to_revision": 3}
    )
    api.fails(
        409,
        "revision_conflict",
        "POST",
        "/channels/prod/rollback",
        "approver",
        json={"to_revision": 1, "expected_revision": 2},
    )


def test_revoke_takes_adapter_out_of_every_channel(world: World) -> None:
    api = world.api
    plan, write = world.approved("plan"), world.approved("write")
    world.promote({"plan": plan["id"], "write": write["id"]})
    body = {"backbone": world.backbone, "adapters": {"write": write["id"]}, "create": True}
    api.ok("POST", "/channels/staging/promote", "approver", json=body)
    api.ok("POST", f"/adapters/{write['id']}/revoke", "approver", json={"reason": "leaks"})
    prod = api.ok("GET", "/channels/prod", "reader")
    assert prod["revision"] == 2
    assert set(prod["library"]) == {"plan"}
    assert prod["reason"] == "revoke write@1: leaks"
    staging = api.ok("GET", "/channels/staging", "reader")
    assert (staging["revision"], staging["library"]) == (2, {})
    # the revoked adapter cannot come back through a rollback
    api.fails(
        409, "invalid_state", "POST", "/channels/prod/rollback", "approver", json={"to_revision": 1}
    )


def test_promote_that_changes_nothing_is_refused(world: World) -> None:
    plan = world.approved("plan")
    world.promote({"plan": plan["id"]})
    body = {"adapters": {"plan": plan["id"]}}
    world.api.fails(422, "invalid", "POST", "/channels/prod/promote", "approver", json=body)


def test_same_weights_under_a_new_version_are_a_new_revision(world: World) -> None:
    api = world.api
    files = api.upload_adapter(seed=3)
    v1 = world.approved("write", files=files)
    body = api.adapter_body("write", world.backbone, files=files)  # the very same bytes
    assert (
        api.fails(409, "conflict", "POST", "/adapters", "publisher", json=body)["adapter_id"]
        == v1["id"]
    )
    config = api.store.get(files["adapter_config.json"]) + b"\n"  # written differently
    v2 = world.approved("write", files={**files, "adapter_config.json": api.put_blob(config)})
    first = world.promote({"write": v1["id"]})["revision"]
    second = world.promote({"write": v2["id"]})["revision"]
    assert second["revision"] == 2
    assert second["library"]["write"]["adapter_id"] == v2["id"]
    assert second["library_digest"] == first["library_digest"]  # the digest is of weights
