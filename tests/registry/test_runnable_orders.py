"""A channel's hard order names only capabilities its library has: a node can run it.

Every new revision (a revoke, which is never refused, a promotion, a rollback) records its
order without the capabilities its library lacks; a revoke's reason says so. A revision
written before this rule (a gap in its order) is flagged by the API (`order_missing`),
`weact channel show` and the channel page.
"""

from __future__ import annotations

import io

from harness import World
from rich.console import Console
from sqlalchemy import select

from registry.cli.render import render_revision
from registry.db.models import SqlRevision
from registry.services.revisions import order_missing

ORDER = ["plan", "search", "write"]


def _three(world: World) -> dict[str, int]:
    ids = {cap: world.approved(cap, seed=seed)["id"] for seed, cap in enumerate(ORDER, 1)}
    world.promote(ids, order=ORDER)
    return ids


def test_a_revoke_records_an_order_that_matches_the_library(world: World) -> None:
    ids = _three(world)
    world.api.ok("POST", f"/adapters/{ids['write']}/revoke", "approver", json={"reason": "leak"})
    head = world.api.ok("GET", "/channels/prod", "reader")
    assert (head["revision"], set(head["library"])) == (2, {"plan", "search"})
    assert head["order"] == ["plan", "search"]
    assert head["order_missing"] == []
    assert head["reason"] == "revoke write@1: leak; order now plan -> search"


def test_promotions_and_rollbacks_record_the_order_their_library_can_run(world: World) -> None:
    ids = _three(world)
    api = world.api
    body = {"adapters": {"write": None}}  # the order plan -> search -> write is kept...
    moved = api.ok("POST", "/channels/prod/promote", "approver", json=body)["revision"]
    assert (moved["order"], set(moved["library"])) == (["plan", "search"], {"plan", "search"})
    assert moved["order_missing"] == []  # ...without write, which the library lost
    new = {"adapters": {"plan": ids["plan"]}, "order": ["plan", "write"], "create": True}
    fresh = api.ok("POST", "/channels/other/promote", "approver", json=new)["revision"]
    assert fresh["order"] == ["plan"]
    back = api.ok("POST", "/channels/prod/rollback", "approver", json={"to_revision": 1})
    assert back["order"] == ORDER


def test_a_revision_that_cannot_run_its_order_is_flagged(world: World) -> None:
    _three(world)
    with world.api.db.write() as session:  # a revision from before the rule: write is gone
        row = session.scalars(select(SqlRevision)).one()
        row.library = {k: v for k, v in row.library.items() if k != "write"}
    head = world.api.ok("GET", "/channels/prod", "reader")
    assert head["order_missing"] == ["write"]
    assert order_missing(head["library"], head["order"]) == ["write"]
    page = world.api.client.get("/channels/prod", headers=world.api.auth("reader")).text
    assert "cannot run" in page
    assert "the hard order names write, which the library has no adapter for" in page
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(render_revision(head))  # what `weact channel show prod` prints
    shown = " ".join(console.export_text().split())
    assert "CANNOT RUN the hard order names write, which the library has no adapter for" in shown
