"""The promotion gate: pure verdicts, then the API (409 with the report, stored either way)."""

from __future__ import annotations

import pytest
from harness import World
from sqlalchemy import select

from registry.db.models import SqlGateReport
from registry.domain import Benchmark, Scored
from registry.gate_rules import judge, report


def _bench(direction: str = "higher", tolerance: float = 0.01) -> Benchmark:
    return Benchmark("b", 1, "d" * 64, "write", "acc", direction, tolerance)


@pytest.mark.parametrize(
    ("direction", "baseline", "candidate", "verdict"),
    [
        ("higher", 0.80, 0.80, "pass"),
        ("higher", 0.80, 0.795, "pass"),  # within tolerance
        ("higher", 0.80, 0.78, "fail"),
        ("higher", 0.80, 0.90, "pass"),
        ("lower", 1.0, 1.005, "pass"),
        ("lower", 1.0, 1.10, "fail"),
        ("lower", 1.0, 0.5, "pass"),
        ("higher", None, 0.5, "no_baseline"),
        ("higher", 0.8, None, "missing"),
        ("lower", None, None, "missing"),
    ],
)
def test_judge(
    direction: str, baseline: float | None, candidate: float | None, verdict: str
) -> None:
    def side(score: float | None) -> Scored | None:
        return None if score is None else Scored(1, score, None, "eve")

    check = judge(_bench(direction), side(baseline), side(candidate))
    assert check.verdict == verdict
    assert check.test == ("point" if verdict in {"pass", "fail"} else None)
    assert report([check]).passed is (verdict in {"pass", "no_baseline"})


def test_empty_gate_passes() -> None:
    assert report([]).passed


def _evaluate(world: World, name: str, score: float, **target: object) -> None:
    body = {"benchmark": name, "benchmark_version": 1, "score": score, "n": 50, **target}
    world.api.ok("POST", "/evaluations", "evaluator", json=body)


def _gate_rows(world: World) -> list[bool]:
    with world.api.db.read() as session:
        return [r.passed for r in session.scalars(select(SqlGateReport).order_by(SqlGateReport.id))]


def test_capability_regression_is_refused_and_recorded(world: World) -> None:
    api = world.api
    v1, v2, v3 = (world.approved("write", s) for s in (1, 2, 3))
    world.benchmark("write-old", "write")
    _evaluate(world, "write-old", 0.80, adapter_id=v1["id"])
    first = world.promote({"write": v1["id"]})
    assert first["gate"]["checks"][0]["verdict"] == "no_baseline"
    _evaluate(world, "write-old", 0.70, adapter_id=v2["id"])
    _evaluate(world, "write-old", 0.81, adapter_id=v3["id"])
    body = {"adapters": {"write": v2["id"]}}
    dry = api.ok("POST", "/channels/prod/gate", "reader", json=body)
    assert dry["passed"] is False
    rows_before = len(_gate_rows(world))
    detail = api.fails(409, "gate_failed", "POST", "/channels/prod/promote", "approver", json=body)
    check = detail["checks"][0]
    assert (check["verdict"], check["baseline"], check["candidate"]) == ("fail", 0.80, 0.70)
    assert check["delta"] == pytest.approx(-0.10)
    assert api.ok("GET", "/channels/prod", "reader")["revision"] == 1
    assert _gate_rows(world)[rows_before:] == [False]
    passed = world.promote({"write": v3["id"]})
    assert passed["gate"]["passed"] is True
    assert passed["gate"]["checks"][0]["verdict"] == "pass"
    assert _gate_rows(world)[-1] is True
    actions = [e["action"] for e in api.ok("GET", "/events?limit=1000", "reader")]
    assert "channel.gate_failed" in actions


def test_missing_candidate_fails_and_no_baseline_passes(world: World) -> None:
    api = world.api
    v1, v2 = world.approved("write", 1), world.approved("write", 2)
    world.benchmark("write-old", "write")
    _evaluate(world, "write-old", 0.5, adapter_id=v1["id"])
    first = world.promote({"write": v1["id"]})
    assert [c["verdict"] for c in first["gate"]["checks"]] == ["no_baseline"]
    detail = api.fails(
        409,
        "gate_failed",
        "POST",
        "/channels/prod/promote",
        "approver",
        json={"adapters": {"write": v2["id"]}},
    )
    assert [c["verdict"] for c in detail["checks"]] == ["missing"]


def test_library_scope_compares_library_digests(world: World) -> None:
    api = world.api
    plan, write = world.approved("plan"), world.approved("write")
    first = world.promote({"plan": plan["id"]})["revision"]
    world.benchmark("agentic", "library", direction="lower")
    _evaluate(world, "agentic", 2.0, library_digest=first["library_digest"])
    body = {"adapters": {"write": write["id"]}}
    api.fails(409, "gate_failed", "POST", "/channels/prod/promote", "approver", json=body)
    # score the candidate library (its digest comes from the dry run's plan)
    candidate_digest = _candidate_digest(world, first, write)
    _evaluate(world, "agentic", 2.5, library_digest=candidate_digest)
    api.fails(409, "gate_failed", "POST", "/channels/prod/promote", "approver", json=body)
    _evaluate(world, "agentic", 1.9, library_digest=candidate_digest)
    result = api.ok("POST", "/channels/prod/promote", "approver", json=body)
    assert result["revision"]["library_digest"] == candidate_digest
    assert result["gate"]["checks"][0]["delta"] == pytest.approx(-0.1)


def _candidate_digest(world: World, first: dict[str, object], write: dict[str, object]) -> str:
    import hashlib
    import json

    library = {"plan": first["library"]["plan"]["manifest_root"], "write": write["manifest_root"]}  # type: ignore[index]
    body = json.dumps(
        {"backbone": world.backbone, "library": library, "order": []},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(body.encode()).hexdigest()


def test_evaluation_targets_are_checked(world: World) -> None:
    api = world.api
    plan = world.adapter("plan")
    world.benchmark("write-old", "write")
    base = {"benchmark": "write-old", "benchmark_version": 1, "score": 1.0, "n": 3}
    api.fails(
        422, "invalid", "POST", "/evaluations", "publisher", json={**base, "adapter_id": plan["id"]}
    )
    api.fails(422, "invalid", "POST", "/evaluations", "publisher", json=base)
    api.fails(
        404,
        "not_found",
        "POST",
        "/evaluations",
        "publisher",
        json={**base, "benchmark_version": 2, "adapter_id": plan["id"]},
    )
    bad_scope = {
        "name": "x",
        "version": 1,
        "dataset_digest": "d" * 64,
        "scope": "nope",
        "metric": "m",
        "direction": "higher",
        "tolerance": 0,
    }
    api.fails(404, "not_found", "POST", "/benchmarks", "approver", json=bad_scope)
