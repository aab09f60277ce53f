"""The hash-chained audit log: every state change is an event; tampering is detected."""

from __future__ import annotations

from harness import World
from sqlalchemy import select, update

from registry.audit import GENESIS
from registry.db.models import SqlEvent


def test_state_changes_write_a_verified_chain(world: World) -> None:
    api = world.api
    adapter = world.approved("write")
    world.promote({"write": adapter["id"]})
    events = api.ok("GET", "/events?limit=1000", "reader")
    actions = [e["action"] for e in events]
    for action in (
        "token.create",
        "backbone.register",
        "capability.create",
        "adapter.register",
        "adapter.approve",
        "channel.promote",
    ):
        assert action in actions
    assert events[0]["prev_hash"] == GENESIS
    assert all(b["prev_hash"] == a["hash"] for a, b in zip(events, events[1:], strict=False))
    promote = events[-1]
    assert promote["actor"] == "bob"
    assert promote["subject"] == "channel:prod"
    assert promote["payload"]["library"] == {"write": adapter["id"]}
    page = api.ok("GET", f"/events?after={events[2]['id']}&limit=2", "reader")
    assert [e["id"] for e in page] == [events[3]["id"], events[4]["id"]]
    report = api.ok("GET", "/events/verify", "reader")
    assert report == {
        "ok": True,
        "count": len(events),
        "first_broken": None,
        "detail": f"{len(events)} events verified",
    }


def _tamper(world: World, **values: object) -> int:
    with world.api.db.write() as session:
        target = session.scalars(select(SqlEvent.id).order_by(SqlEvent.id)).all()[5]
        session.execute(update(SqlEvent).where(SqlEvent.id == target).values(**values))
    return target


def test_edited_payload_is_detected(world: World) -> None:
    world.approved("write")
    target = _tamper(world, payload='{"name":"write@99"}')
    report = world.api.ok("GET", "/events/verify", "reader")
    assert report["ok"] is False
    assert report["first_broken"] == target
    assert report["count"] == 5
    assert "stored hash" in report["detail"]


def test_rewritten_hash_breaks_the_next_link(world: World) -> None:
    world.approved("write")
    target = _tamper(world, actor="mallory", hash="1" * 64)
    report = world.api.ok("GET", "/events/verify", "reader")
    assert report["first_broken"] == target


def test_failed_requests_write_no_event(world: World) -> None:
    api = world.api
    before = len(api.ok("GET", "/events?limit=1000", "reader"))
    api.fails(422, "invalid", "POST", "/capabilities", json={"name": "../x"})
    api.fails(403, "forbidden", "POST", "/capabilities", "reader", json={"name": "ok"})
    assert len(api.ok("GET", "/events?limit=1000", "reader")) == before
