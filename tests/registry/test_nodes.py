"""Runtime node heartbeats; and the service imports no ML stack."""

from __future__ import annotations

import subprocess
import sys

from harness import World


def _events(world: World) -> list[str]:
    return [e["action"] for e in world.api.ok("GET", "/events?limit=1000", "reader")]


def test_heartbeats_upsert_nodes_and_log_changes(world: World) -> None:
    api = world.api
    audit = {"ok": True, "backbone_root": world.backbone, "adapters": {"write@1": "a" * 64}}
    beat = {"channel": "prod", "revision": None, "audit": audit}
    first = api.ok("POST", "/nodes/gpu-1/heartbeat", "node", json=beat)
    assert (first["id"], first["revision"], first["audit_ok"]) == ("gpu-1", None, True)
    assert first["audit"]["adapters"] == {"write@1": "a" * 64}
    reports = _events(world).count("node.report")
    api.ok("POST", "/nodes/gpu-1/heartbeat", "node", json=beat)
    assert _events(world).count("node.report") == reports  # nothing changed: no event
    failed = {**beat, "revision": 3, "audit": {"ok": False, "detail": "root mismatch"}}
    second = api.ok("POST", "/nodes/gpu-1/heartbeat", "admin", json=failed)
    assert (second["revision"], second["audit_ok"]) == (3, False)
    assert second["last_heartbeat"] > first["last_heartbeat"]
    assert _events(world).count("node.report") == reports + 1
    nodes = api.ok("GET", "/nodes", "reader")
    assert [(n["id"], n["revision"]) for n in nodes] == [("gpu-1", 3)]


def test_registry_imports_no_ml_stack() -> None:
    code = (
        "import sys; import registry.app, registry.services.adapters, registry.db.migrate; "
        "heavy = {'torch', 'transformers', 'peft', 'runtime', 'trainers', 'numpy'}; "
        "heavy &= set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_node_reports_a_refused_load_as_an_audit_event(world: World) -> None:
    api = world.api
    body = {"kind": "integrity.refused", "adapter": "write@2", "detail": "root aa != bb"}
    event = api.ok("POST", "/nodes/vllm-1/events", "node", json=body)
    assert (event["action"], event["subject"]) == ("node.integrity.refused", "node:vllm-1")
    assert event["payload"] == {"adapter": "write@2", "detail": "root aa != bb"}
    assert api.ok("GET", "/events/verify", "reader")["ok"]
    # the node token is bound to vllm-1 now: it cannot report as another node
    api.fails(403, "forbidden", "POST", "/nodes/vllm-2/events", "node", json=body)
    api.fails(403, "forbidden", "POST", "/nodes/vllm-1/events", "reader", json=body)
    api.fails(422, "invalid", "POST", "/nodes/vllm-1/events", "node",
             json={**body, "kind": "anything"})  # fmt: skip
