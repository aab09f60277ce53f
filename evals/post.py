"""Posting a run's per-item scores: one evaluation per registry benchmark of the suite.

A benchmark belongs to the suite when its dataset digest is the suite's digest and its metric
is one the scoring computes (`em`, `f1`, `doc_recall`, `plan_coverage`). Library-scoped
benchmarks are keyed by the library digest; a capability-scoped one by the adapter version
evaluated for that capability. Each evaluation carries `{item id: metric}` and provenance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from evals.runner import ItemResult
from evals.scoring import METRICS
from registry.client import RegistryClient
from registry.client.records import Benchmark, Evaluation

LIBRARY_SCOPE = "library"


def suite_benchmarks(client: RegistryClient, suite_digest: str) -> list[Benchmark]:
    """The latest version of every benchmark defined on this suite with a scored metric."""
    latest: dict[str, Benchmark] = {}
    for bench in client.list_benchmarks():
        if bench["dataset_digest"] != suite_digest or bench["metric"] not in METRICS:
            continue
        if bench["name"] not in latest or bench["version"] > latest[bench["name"]]["version"]:
            latest[bench["name"]] = bench
    return [latest[name] for name in sorted(latest)]


def post_results(
    client: RegistryClient,
    *,
    suite_digest: str,
    results: Mapping[str, ItemResult],
    library_digest: str | None = None,
    adapters: Mapping[str, int] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> list[Evaluation]:
    """Post one evaluation per suite benchmark that the run can key; returns them."""
    posted = []
    for bench in suite_benchmarks(client, suite_digest):
        target: dict[str, Any]
        if bench["scope"] == LIBRARY_SCOPE:
            if library_digest is None:
                continue
            target = {"library_digest": library_digest}
        elif adapters and bench["scope"] in adapters:
            target = {"adapter_id": adapters[bench["scope"]]}
        else:
            continue
        items = {key: r.score.metric(bench["metric"]) for key, r in sorted(results.items())}
        posted.append(
            client.create_evaluation(
                benchmark=bench["name"],
                benchmark_version=int(bench["version"]),
                score=math.fsum(items.values()) / len(items),
                n=len(items),
                items=items,
                provenance={"dataset_digest": suite_digest, **(provenance or {})},
                **target,
            )
        )
    return posted
