"""The paired gate end to end over real HTTP (the registry as `weact serve` runs it, in this
process: `support.serving.registry_in_process`, on SQLite and PostgreSQL).

Evaluations carry per-item scores and provenance; the gate trusts only evaluations by
someone other than the candidate's publisher; a refused promotion returns 409 with the
report; `weact channel gate` exits 0 / 1 / 2 (run in this process by click's runner, as
`weact` runs it: the console script's own start is test_cli_e2e's subject).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import factories
import pytest
from click.testing import CliRunner, Result
from harness import make_tokens
from support.serving import InProcessRegistry, registry_in_process

from cli.main import app
from registry import errors
from registry.client import RegistryClient
from registry.db.session import Database

SUITE = "a" * 64
N = 60


@dataclass
class Served:
    registry: InProcessRegistry
    tokens: dict[str, str]
    tmp: Path

    def client(self, who: str) -> RegistryClient:
        return RegistryClient(self.registry.url, self.tokens[who])


@pytest.fixture
def served(database_url: str, tmp_path: Path) -> Iterator[Served]:
    with registry_in_process(tmp_path, database_url, str(tmp_path / "blobs")) as registry:
        db = Database(registry.database_url)
        try:
            tokens = make_tokens(db)
        finally:
            db.dispose()
        yield Served(registry, tokens, tmp_path)


def _items(correct: set[int]) -> dict[str, float]:
    return {f"test-{i:03d}": float(i in correct) for i in range(N)}


def _post(
    client: RegistryClient, digest: str, items: dict[str, float], **provenance: Any
) -> dict[str, Any]:
    return client.create_evaluation(
        benchmark="research-em",
        benchmark_version=1,
        score=sum(items.values()) / len(items),
        n=len(items),
        library_digest=digest,
        items=items,
        provenance={"dataset_digest": SUITE, "engine": "peft", "policy": "hard", **provenance},
    )


def _setup(served: Served) -> tuple[RegistryClient, RegistryClient, RegistryClient, list[int]]:
    admin, alice, bob = (served.client(w) for w in ("admin", "publisher", "approver"))
    path = factories.write_backbone(served.tmp / "backbone")
    admin.register_backbone(name="tiny", manifest=factories.backbone_manifest_json(path))
    admin.create_capability(name="write", description="write", order=0)
    ids = []
    for seed in (1, 2, 3):
        adapter = alice.push_adapter(
            factories.write_adapter(served.tmp / f"write-{seed}", seed=seed), capability="write"
        )
        bob.approve(adapter["id"])
        ids.append(adapter["id"])
    bob.promote("prod", {"write": ids[0]}, create=True)
    bob.create_benchmark(
        name="research-em", version=1, dataset_digest=SUITE, scope="library",
        metric="em", direction="higher", tolerance=0.02,
    )  # fmt: skip
    return alice, bob, served.client("evaluator"), ids


def _weact_gate(served: Served, *args: str) -> Result:
    env = {"WEACT_URL": served.registry.url, "WEACT_TOKEN": served.tokens["reader"]}
    return CliRunner().invoke(
        app, ["channel", "gate", "prod", *args], env=env, catch_exceptions=False
    )


def test_paired_gate_through_http(served: Served) -> None:
    alice, bob, eve, (v1, v2, v3) = _setup(served)
    baseline_digest = bob.get_channel("prod")["library_digest"]
    base = _items(set(range(0, N, 2)) | {1, 3, 5})  # 33 of 60
    _post(eve, baseline_digest, base)

    # v2 changes nothing measurable: evaluated by eve, the paired test passes
    dry = bob.gate("prod", {"write": v2})
    assert dry["baseline_library_digest"] == baseline_digest
    posted = _post(eve, dry["library_digest"], dict(base), code_version="test")
    assert posted["provenance"]["dataset_digest"] == SUITE
    stored = eve.get_evaluation(posted["id"])
    assert stored["items"] == base
    assert len(stored["items_digest"]) == 64
    report = bob.gate("prod", {"write": v2})
    check = report["checks"][0]
    assert (report["passed"], check["verdict"], check["test"], check["n"]) == (
        True, "pass", "paired_bootstrap", N,
    )  # fmt: skip
    assert (check["baseline_by"], check["candidate_by"]) == ("eve", "eve")
    assert bob.gate("prod", {"write": v2}) == report  # deterministic for its seed
    done = _weact_gate(served, "--adapter", f"write=#{v2}")
    assert done.exit_code == 0, done.stderr
    assert "paired" not in done.stderr

    # v3: an injected per-item regression (12 correct items broken) is refused with the report
    v3_digest = bob.gate("prod", {"write": v3})["library_digest"]
    broken = dict(base)
    for key in [k for k, v in base.items() if v == 1.0][:12]:
        broken[key] = 0.0
    _post(eve, v3_digest, broken)
    with pytest.raises(errors.GateFailedError) as refused:
        bob.promote("prod", {"write": v3})
    failed = refused.value.detail["checks"][0]
    assert failed["verdict"] == "fail"
    assert failed["delta"] == pytest.approx(-12 / N)
    assert failed["ci_high"] < 0
    assert failed["candidate_by"] == "eve"
    assert bob.get_channel("prod")["revision"] == 1
    gate = _weact_gate(served, "--adapter", f"write=#{v3}")
    assert gate.exit_code == 1
    assert "FAILED" in gate.stdout
    assert "eve" in gate.stdout

    # the publisher's own perfect scores for v3 do not count: the gate still sees eve's
    _post(alice, v3_digest, _items(set(range(N))))
    again = bob.gate("prod", {"write": v3})["checks"][0]
    assert (again["verdict"], again["candidate_evaluation"]) == (
        "fail",
        failed["candidate_evaluation"],
    )

    # v2 promoted; the gate report of the refusal was stored and is in the audit trail
    assert bob.promote("prod", {"write": v2})["gate"]["passed"] is True
    assert "channel.gate_failed" in [e["action"] for e in bob.list_events(limit=1000)]


def test_missing_and_untrusted_evaluations_fail(served: Served) -> None:
    alice, bob, eve, (_, v2, _) = _setup(served)
    _post(eve, bob.get_channel("prod")["library_digest"], _items({1, 2, 3}))
    with pytest.raises(errors.GateFailedError) as missing:
        bob.promote("prod", {"write": v2})
    assert missing.value.detail["checks"][0]["verdict"] == "missing"
    # only the candidate's publisher evaluated it: ignored, still missing, and said why
    _post(alice, bob.gate("prod", {"write": v2})["library_digest"], _items({1, 2, 3}))
    check = bob.gate("prod", {"write": v2})["checks"][0]
    assert check["verdict"] == "missing"
    assert "by alice" in check["detail"]
    assert _weact_gate(served, "--adapter", f"write=#{v2}").exit_code == 1
    cannot = _weact_gate(served, "--adapter", "write=#999")  # a check that cannot run: 2
    assert cannot.exit_code == 2, (cannot.stdout, cannot.stderr)
    assert "Traceback" not in cannot.stderr


def test_evaluations_are_validated(served: Served) -> None:
    _, bob, eve, _ = _setup(served)
    digest = bob.get_channel("prod")["library_digest"]
    items = _items({1})
    bad_calls = [
        ({"score": 0.5}, "not the mean"),
        ({"n": N + 1}, "item scores were given"),
        ({"items_digest": "b" * 64}, "differs from the items'"),
        ({"provenance": {"dataset_digest": "c" * 64}}, "is not the dataset"),
    ]
    for change, problem in bad_calls:
        body: dict[str, Any] = {
            "benchmark": "research-em", "benchmark_version": 1, "score": 1 / N, "n": N,
            "library_digest": digest, "items": items, **change,
        }  # fmt: skip
        with pytest.raises(errors.InvalidError, match=problem):
            eve.create_evaluation(**body)
    assert eve.list_evaluations() == []
    with pytest.raises(errors.NotFoundError):
        eve.get_evaluation(99)
