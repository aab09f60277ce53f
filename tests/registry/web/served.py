"""The scenario of ``webworld``, played against a running registry through ``registry.client``.

Tokens are minted the way an operator does it: the first admin token straight into the
database (``bootstrap_token``), every other one over ``POST /v1/tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from factories import backbone_manifest_json, write_adapter, write_backbone
from support.serving import RunningRegistry
from webworld import BENCHMARK, ITEMS, item_scores

from registry.client import RegistryClient
from registry.errors import GateFailedError

PEOPLE = {
    "reader": "rita",
    "publisher": "alice",
    "approver": "bob",
    "node": "node-1",
    "evaluator": "eve",
}
CAPABILITIES = (("plan", "Plan the research"), ("search", "Search the KB"), ("write", "Write"))
CARD = "# write++\n\nWrites the report with <b>citations</b> kept; trained on kb-v2.\n"
"""write@2's model card (its README.md): markup in it is text, never HTML."""
TAGS = {"dataset": "kb-v2", "stage": "beta"}
"""write@2's tags."""


@dataclass
class Served:
    url: str
    tmp: Path
    tokens: dict[str, str] = field(default_factory=dict)
    ids: dict[str, int] = field(default_factory=dict)
    backbone: str = ""

    def client(self, who: str) -> RegistryClient:
        return RegistryClient(self.url, self.tokens[who])

    def push(self, capability: str, seed: int, card: str | None = None, **extra: Any) -> int:
        directory = write_adapter(self.tmp / f"{capability}-{seed}", seed=seed)
        if card is not None:
            (directory / "README.md").write_text(card, encoding="utf-8")
        provenance = {"capabilities": [capability], "data_digests": ["e" * 64], "seed": seed}
        with self.client("publisher") as client:
            adapter = client.push_adapter(
                directory, capability=capability, provenance=provenance, **extra
            )
        return adapter["id"]

    def push_approved(self, capability: str, seed: int, **extra: Any) -> int:
        adapter_id = self.push(capability, seed, **extra)
        with self.client("approver") as client:
            client.approve(adapter_id, reason="looks right")
        return adapter_id


def _score(served: Served, adapter_id: int, score: float) -> None:
    with served.client("evaluator") as client:  # not the publisher: the gate ignores those
        client.create_evaluation(
            benchmark="write-quality",
            benchmark_version=1,
            adapter_id=adapter_id,
            score=score,
            n=ITEMS,
            items=item_scores(score),
        )


def _catalog(served: Served) -> None:
    backbone = write_backbone(served.tmp / "backbone")
    with served.client("admin") as admin:
        for role, name in PEOPLE.items():
            served.tokens[role] = admin.create_token(name=name, role=role)["token"]
        manifest = backbone_manifest_json(backbone)
        served.backbone = admin.register_backbone(name="tiny-llama", manifest=manifest)["root"]
        for order, (name, description) in enumerate(CAPABILITIES):
            admin.create_capability(name=name, description=description, order=order)


def populate_served(server: RunningRegistry, tmp: Path) -> Served:
    served = Served(url=server.url, tmp=tmp)
    served.tokens["admin"] = server.bootstrap_token("root", "admin")
    _catalog(served)
    ids = served.ids
    for seed, (capability, _) in enumerate(CAPABILITIES, start=11):
        ids[f"{capability}@1"] = served.push_approved(capability, seed)
    with served.client("approver") as approver:
        first = {cap: ids[f"{cap}@1"] for cap, _ in CAPABILITIES}
        approver.promote("prod", first, backbone=served.backbone, order=list(first), create=True)
        approver.create_benchmark(**BENCHMARK)
    ids["write@2"] = served.push_approved(
        "write", 14, parent_id=ids["write@1"], label="write++", card=CARD, tags=TAGS
    )
    _score(served, ids["write@1"], 0.80)
    _score(served, ids["write@2"], 0.86)
    ids["write@3"] = served.push_approved("write", 15, parent_id=ids["write@2"], label="write-bad")
    _score(served, ids["write@3"], 0.50)
    with served.client("approver") as approver:
        approver.promote("prod", {"write": ids["write@2"]}, reason="write++ beats write")
        with pytest.raises(GateFailedError):
            approver.promote("prod", {"write": ids["write@3"]})
    ids["write@4"] = served.push("write", 16, parent_id=ids["write@1"], label="write-alt")
    audit = {"ok": True, "backbone_root": served.backbone, "adapters": {"write@1": "a" * 64}}
    with served.client("node") as node:
        node.heartbeat("node-1", channel="prod", revision=1, audit=audit)
    return served
