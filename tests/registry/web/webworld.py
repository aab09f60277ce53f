"""A registry populated for the web pages, through the API only (no shortcut into the DB).

plan@1, search@1, write@1 (approved) -> prod revision 1 (order plan, search, write)
write@2 "write++" (parent write@1, approved, scores 0.86 vs 0.80) -> prod revision 2
write@3 "write-bad" (parent write@2, approved, scores 0.50) -> the gate refuses it
write@4 "write-alt" (parent write@1): a candidate, a second branch of the lineage
node-1 follows prod and serves revision 1: one behind, audit ok
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from harness import Harness, World
from sqlalchemy import event

BENCHMARK = {
    "name": "write-quality",
    "version": 1,
    "dataset_digest": "d" * 64,
    "scope": "write",
    "metric": "accuracy",
    "direction": "higher",
    "tolerance": 0.01,
}


@dataclass
class Site:
    api: Harness
    backbone: str
    ids: dict[str, int] = field(default_factory=dict)

    def get(self, path: str, who: str | None = "reader", **kw: Any) -> Any:
        """A page, authenticated like an API call (``Authorization: Bearer``)."""
        headers = {**self.api.auth(who), **kw.pop("headers", {})}
        return self.api.client.get(path, headers=headers, follow_redirects=False, **kw)

    def adapter(self, name: str) -> dict[str, Any]:
        return dict(self.api.ok("GET", f"/adapters/{self.ids[name]}", "reader"))

    def approved(self, capability: str, seed: int) -> int:
        """A new approved version (through the API), recorded in ``ids``; its id."""
        adapter = self.api.approved(capability, self.backbone, seed)
        self.ids[adapter["name"]] = adapter["id"]
        return int(adapter["id"])

    def sign_in(self, who: str) -> str:
        """Sign the test client in through the form (cookie jar); returns the page CSRF."""
        client = self.api.client
        nonce = hidden(client.get("/sign-in").text, "csrf")
        form = {"token": self.api.tokens[who], "csrf": nonce, "next": "/nodes"}
        answer = client.post("/sign-in", data=form, follow_redirects=False)
        assert answer.status_code == 303, answer.text
        assert answer.headers["location"] == "/nodes"
        return hidden(client.get("/").text, "csrf")

    def post(self, path: str, data: dict[str, Any], **kw: Any) -> Any:
        """A form post with whatever the client's cookie jar holds."""
        return self.api.client.post(path, data=data, follow_redirects=False, **kw)


@contextmanager
def counted(site: Site) -> Iterator[list[str]]:
    """The SQL statements run meanwhile."""
    statements: list[str] = []

    def record(*args: Any) -> None:
        statements.append(str(args[2]))

    engine = site.api.db.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", record)


def hidden(html: str, name: str) -> str:
    """The value of the first hidden input called ``name`` in a page."""
    found = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)"', html)
    assert found is not None, f"no hidden {name!r} field"
    return found.group(1)


ITEMS = 20


def item_scores(score: float) -> dict[str, float]:
    """Per-item scores whose mean is ``score`` (for the gate's paired test): offsets of
    -0.1..0.1 that cancel out over the 20 items and differ from one score to another."""
    shift = round(score * 100)
    return {f"q{i:02d}": score + 0.05 * ((7 * i + shift) % 5 - 2) for i in range(ITEMS)}


def _score(api: Harness, adapter_id: int, score: float) -> None:
    """Scores come from an evaluator: the gate ignores those posted by the publisher."""
    body = {"benchmark": "write-quality", "benchmark_version": 1, "adapter_id": adapter_id}
    items = {"score": score, "n": ITEMS, "items": item_scores(score)}
    api.ok("POST", "/evaluations", "evaluator", json={**body, **items})


def populate(world: World) -> Site:
    api = world.api
    site = Site(api=api, backbone=world.backbone)
    for seed, capability in enumerate(("plan", "search", "write"), start=11):
        site.ids[f"{capability}@1"] = world.approved(capability, seed=seed)["id"]
    world.promote(
        {cap: site.ids[f"{cap}@1"] for cap in ("plan", "search", "write")},
        order=["plan", "search", "write"],
    )
    api.ok("POST", "/benchmarks", "approver", json=BENCHMARK)
    write1 = site.ids["write@1"]
    site.ids["write@2"] = world.approved("write", seed=14, parent_id=write1, label="write++")["id"]
    _score(api, write1, 0.80)
    _score(api, site.ids["write@2"], 0.86)
    world.promote({"write": site.ids["write@2"]}, reason="write++ beats write")
    parent = site.ids["write@2"]
    site.ids["write@3"] = world.approved("write", seed=15, parent_id=parent, label="write-bad")[
        "id"
    ]
    _score(api, site.ids["write@3"], 0.50)
    body = {"backbone": world.backbone, "adapters": {"write": site.ids["write@3"]}}
    api.fails(409, "gate_failed", "POST", "/channels/prod/promote", "approver", json=body)
    site.ids["write@4"] = world.adapter("write", seed=16, parent_id=write1, label="write-alt")["id"]
    audit = {"ok": True, "backbone_root": world.backbone, "adapters": {"write@1": "a" * 64}}
    beat = {"channel": "prod", "revision": 1, "audit": audit}
    api.ok("POST", "/nodes/node-1/heartbeat", "node", json=beat)
    return site
