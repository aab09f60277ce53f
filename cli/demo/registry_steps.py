"""The registry lifecycle, one step each: serve, tokens, backbone, capabilities, adapters,
approval by a second principal, promotion, an update with lineage, rollback, pull, revocation,
and the audit event chain. These steps need no torch (`weact demo --plain` runs only them).
"""

from __future__ import annotations

from cli.demo.harness import Demo, Step, record, say
from cli.demo.weights import ADAPTER_SEEDS, build_plain_weights, build_weights
from registry import errors
from registry.client import ADAPTER_FILES
from registry.launcher import embedded_registry
from storage.manifest import manifest_of_path

CAPABILITIES = {
    "plan": "Break the research question into steps.",
    "search": "Query the knowledge base and collect evidence.",
    "write": "Write the cited answer.",
}


def start_registry(demo: Demo) -> None:
    demo.registry = demo.stack.enter_context(embedded_registry(demo.workdir))
    say(f"weact serve at {demo.registry.url}  (SQLite + blobs under {demo.workdir}/.weact)")


def create_tokens(demo: Demo) -> None:
    assert demo.registry is not None
    demo.login("admin", demo.registry.bootstrap_token("admin", "admin"))
    say("admin      admin      (written to the database, like `weact token create`)")
    for principal, role in (
        ("alice", "publisher"),
        ("bob", "approver"),
        ("alice-approver", "approver"),
    ):
        name = principal.split("-")[0]
        created = demo.client("admin").create_token(name=name, role=role)
        demo.login(principal, created["token"])
        say(f"{name:<10} {role:<10} (POST /v1/tokens)")


def build_demo_weights(demo: Demo) -> None:
    root = demo.workdir / "weights"
    demo.weights = build_plain_weights(root) if demo.plain_weights else build_weights(root)
    say(f"{demo.weights.kind}: backbone + adapters {', '.join(demo.weights.adapters)}")


def register_backbone(demo: Demo) -> None:
    assert demo.weights is not None
    manifest = manifest_of_path(demo.weights.backbone)
    created = demo.client("admin").register_backbone(name="tiny-llama", manifest=manifest.to_json())
    demo.backbone_root = created["root"]
    say(f"{created['name']}: {created['tensor_count']} tensors, {created['param_count']} params")
    say(f"manifest root {created['root']}")


def create_capabilities(demo: Demo) -> None:
    for order, (name, description) in enumerate(CAPABILITIES.items()):
        demo.client("admin").create_capability(name=name, description=description, order=order)
        say(f"{name} (order {order}): {description}")


def push_adapters(demo: Demo) -> None:
    assert demo.weights is not None
    for capability in CAPABILITIES:
        pushed = demo.client("alice").push_adapter(
            demo.weights.adapters[capability],
            capability=capability,
            backbone=demo.backbone_root,
            provenance={"capabilities": [capability], "seed": ADAPTER_SEEDS[capability]},
        )
        demo.adapters[capability] = pushed
        root = pushed["manifest_root"][:16]
        say(f"{pushed['name']} (id {pushed['id']}) {pushed['state']}, manifest {root}")


def approve_adapters(demo: Demo) -> None:
    first = demo.adapters["plan"]
    try:
        demo.client("alice-approver").approve(first["id"])
    except errors.RegistryError as exc:
        say(f"alice approving her own {first['name']}: refused ({exc.code}: {exc.detail})")
    else:
        raise RuntimeError("the registry let a publisher approve her own adapter")
    for capability in CAPABILITIES:
        approved = demo.client("bob").approve(demo.adapters[capability]["id"])
        demo.adapters[capability] = approved
        say(f"bob approved {approved['name']}")


def promote_library(demo: Demo) -> None:
    ids = {capability: demo.adapters[capability]["id"] for capability in CAPABILITIES}
    result = demo.client("bob").promote(
        "prod", ids, backbone=demo.backbone_root, order=list(CAPABILITIES), create=True
    )
    record(demo, result["revision"], f"gate passed ({len(result['gate']['checks'])} checks)")


def push_write_plus_plus(demo: Demo) -> None:
    assert demo.weights is not None
    parent = demo.adapters["write"]
    pushed = demo.client("alice").push_adapter(
        demo.weights.adapters["write++"],
        capability="write",
        backbone=demo.backbone_root,
        parent_id=parent["id"],
        label="write++",
        provenance={"capabilities": ["write"], "replay": False, "seed": ADAPTER_SEEDS["write++"]},
    )
    demo.adapters["write++"] = demo.client("bob").approve(pushed["id"])
    say(f"{pushed['name']} label {pushed['label']!r}, parent {parent['name']}; approved by bob")


def show_lineage(demo: Demo) -> None:
    lineage = demo.client("alice").lineage(demo.adapters["write++"]["id"])
    chain = [*lineage["ancestors"], lineage["adapter"]]
    say(" -> ".join(a["name"] + (f" ({a['label']})" if a["label"] else "") for a in chain))


def promote_update(demo: Demo) -> None:
    current = demo.revisions[-1]["revision"]
    result = demo.client("bob").promote(
        "prod", {"write": demo.adapters["write++"]["id"]}, expected_revision=current
    )
    record(demo, result["revision"], "write -> write++; plan and search untouched")


def roll_back(demo: Demo) -> None:
    first = demo.revisions[0]["revision"]
    rev = demo.client("bob").rollback(
        "prod", to_revision=first, expected_revision=demo.revisions[-1]["revision"]
    )
    same = rev["library_digest"] == demo.revisions[0]["library_digest"]
    record(demo, rev, f"library equal to r{first}: {same}")


def pull_library(demo: Demo) -> None:
    assert demo.weights is not None
    prod = demo.client("alice").get_channel("prod")
    for capability, entry in sorted(prod["library"].items()):
        target = demo.client("alice").pull_adapter(
            entry["adapter_id"], demo.workdir / "pulled" / capability
        )
        pushed = demo.weights.adapters[capability]
        same = all(
            (target / name).read_bytes() == (pushed / name).read_bytes() for name in ADAPTER_FILES
        )
        say(f"{entry['name']} -> {target.name}/ verified, byte-identical to the push: {same}")


def revoke_update(demo: Demo) -> None:
    revoked = demo.client("bob").revoke(
        demo.adapters["write++"]["id"], reason="regressed on old tasks"
    )
    say(f"{revoked['name']} is {revoked['state']}")


def verify_audit(demo: Demo) -> None:
    report = demo.client("admin").verify_events()
    if not report["ok"]:
        raise RuntimeError(f"event chain broken at {report['first_broken']}: {report['detail']}")
    say(f"{report['count']} events, hash chain intact")


REGISTRY_STEPS: list[Step] = [
    Step("Start an embedded registry", start_registry),
    Step("Create tokens (admin, publisher alice, approvers bob and alice)", create_tokens),
    Step("Build a tiny backbone and LoRA adapters", build_demo_weights),
    Step("Register the backbone by its manifest", register_backbone),
    Step("Create capabilities plan, search, write", create_capabilities),
    Step("Push three adapters (alice)", push_adapters),
    Step("Approve with a different principal", approve_adapters),
    Step("Promote the library to prod", promote_library),
    Step("Push write++ with --parent write", push_write_plus_plus),
    Step("Show the lineage of write++", show_lineage),
    Step("Promote write++ to prod", promote_update),
    Step("Roll prod back to its first revision", roll_back),
    Step("Pull prod's library (every blob verified by sha256)", pull_library),
    Step("Revoke write++", revoke_update),
]
VERIFY = Step("Verify the audit event chain", verify_audit)
