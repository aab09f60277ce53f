"""A channel's required benchmarks: every gate of the channel judges them, so a change no
benchmark covers cannot pass by being judged on nothing."""

from __future__ import annotations

from harness import World
from test_gate import _evaluate


def test_a_required_benchmark_is_judged_whatever_the_change(world: World) -> None:
    api = world.api
    plan, write1, write2 = (
        world.approved("plan", 1),
        world.approved("write", 2),
        world.approved("write", 3),
    )
    world.promote({"plan": plan["id"], "write": write1["id"]}, order=["plan", "write"])
    world.benchmark("plan-quality", "plan")  # plan's: a write change alone never meets it
    body = {"adapters": {"write": write2["id"]}}
    ungated = api.ok("POST", "/channels/prod/gate", "approver", json=body)
    assert (ungated["passed"], ungated["checks"]) == (True, [])

    missing = api.fails(
        404, "not_found", "PUT", "/channels/prod/required-benchmarks", "approver",
        json={"benchmarks": ["plan-qualty"]},
    )  # fmt: skip
    assert missing == "benchmark 'plan-qualty' does not exist (did you mean 'plan-quality'?)"
    api.fails(
        403, "forbidden", "PUT", "/channels/prod/required-benchmarks", "publisher",
        json={"benchmarks": ["plan-quality"]},
    )  # fmt: skip
    head = api.ok(
        "PUT", "/channels/prod/required-benchmarks", "approver",
        json={"benchmarks": ["plan-quality"]},
    )  # fmt: skip
    assert (head["revision"], head["required_benchmarks"]) == (1, ["plan-quality"])
    assert api.ok("GET", "/channels/prod", "reader")["required_benchmarks"] == ["plan-quality"]

    [check] = api.ok("POST", "/channels/prod/gate", "approver", json=body)["checks"]
    assert (check["benchmark"], check["verdict"]) == ("plan-quality", "missing")
    api.fails(409, "gate_failed", "POST", "/channels/prod/promote", "approver", json=body)
    _evaluate(world, "plan-quality", 0.9, adapter_id=plan["id"])
    judged = api.ok("POST", "/channels/prod/promote", "approver", json=body)["gate"]
    assert [(c["benchmark"], c["verdict"]) for c in judged["checks"]] == [("plan-quality", "pass")]

    cleared = api.ok(
        "PUT", "/channels/prod/required-benchmarks", "approver", json={"benchmarks": []}
    )
    assert cleared["required_benchmarks"] == []
