"""Posting masked-NLL scores to the registry as an evaluation with per-item scores.

`weact eval nll --post BENCHMARK[@VERSION]` sends, for a capability-scoped benchmark, that
capability's samples (its adapter is `--adapter-id`), and for a library-scoped one every
sample (keyed by `--library-digest`). Items are `<trajectory>#<phase>` -> mean NLL per
supervised token; the evaluation's score is their mean, so the gate's paired test and the
headline number agree.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from registry.client import RegistryClient
from registry.client.records import Benchmark, Evaluation
from registry.errors import NotFoundError
from storage.digest import sha256_file
from trainers.errors import NoSamplesError
from trainers.evaluate import NllScore
from trainers.publish import code_version

LIBRARY_SCOPE = "library"


def parse_benchmark(spec: str) -> tuple[str, int | None]:
    """`name` or `name@version`."""
    name, sep, version = spec.partition("@")
    if not name or (sep and not version.isdigit()):
        raise ValueError(f"--post {spec!r}: expected NAME or NAME@VERSION")
    return name, int(version) if sep else None


def find_benchmark(client: RegistryClient, name: str, version: int | None) -> Benchmark:
    """The named benchmark (its latest version unless one is given)."""
    found = [b for b in client.list_benchmarks() if b["name"] == name]
    if version is not None:
        found = [b for b in found if b["version"] == version]
    if not found:
        raise NotFoundError(f"benchmark {name}{f' v{version}' if version else ''} not found")
    return max(found, key=lambda b: int(b["version"]))


def items_for(benchmark: Mapping[str, Any], scores: Mapping[str, NllScore]) -> dict[str, float]:
    scope = benchmark["scope"]
    chosen = (
        scores.values()
        if scope == LIBRARY_SCOPE
        else [s for s in scores.values() if s.capability == scope]
    )
    items = {key: value for s in chosen for key, value in s.items.items()}
    if not items:
        raise NoSamplesError(f"no samples of {scope!r} to post for benchmark {benchmark['name']}")
    return items


def post_nll(
    client: RegistryClient,
    *,
    benchmark: str,
    scores: Mapping[str, NllScore],
    data: Sequence[Path],
    adapter_id: int | None = None,
    library_digest: str | None = None,
    dataset_digest: str | None = None,
) -> Evaluation:
    """Post one evaluation of `benchmark` (NAME[@VERSION]) from masked-NLL scores."""
    name, version = parse_benchmark(benchmark)
    bench = find_benchmark(client, name, version)
    items = items_for(bench, scores)
    provenance: dict[str, Any] = {
        "engine": "peft",
        "code_version": code_version(),
        "extra": {"metric": "nll", "data": {os.fspath(p): sha256_file(p) for p in data}},
    }
    if dataset_digest is not None:
        provenance["dataset_digest"] = dataset_digest
    return client.create_evaluation(
        benchmark=bench["name"],
        benchmark_version=int(bench["version"]),
        score=math.fsum(items.values()) / len(items),
        n=len(items),
        items=items,
        adapter_id=adapter_id,
        library_digest=library_digest,
        provenance=provenance,
    )
