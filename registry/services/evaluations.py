"""Benchmarks (what the gate checks) and evaluations (their scores, per item, with provenance).

Per-item scores `{item id: score}` are stored with the evaluation (the paired gate reads
them in the promotion's transaction); `items_digest` is the sha256 of their canonical JSON,
computed here and checked against the client's when it gives one. The score must be their
mean and `n` their count. A provenance's `dataset_digest` must be the benchmark's.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.audit import append_event
from registry.db.convert import to_benchmark, to_evaluation
from registry.db.models import SqlAdapterVersion, SqlBenchmark, SqlEvaluation
from registry.domain import Benchmark, Evaluation, Principal
from registry.errors import ConflictError, InvalidError, NotFoundError
from registry.names import LIBRARY_SCOPE
from registry.services.capabilities import find_capability_row
from registry.services.retry import insert_unique
from storage import is_sha256


def _digest(what: str, value: str | None) -> None:
    if value is not None and not is_sha256(value):
        raise InvalidError(f"{what} must be a sha256 hex digest, got {value!r}")


def create_benchmark(*, session: Session, actor: Principal, benchmark: Benchmark) -> Benchmark:
    """Register a benchmark version; scope is a capability name or ``library``."""
    _digest("dataset_digest", benchmark.dataset_digest)
    if benchmark.direction not in {"higher", "lower"}:
        raise InvalidError("direction must be 'higher' or 'lower'")
    if benchmark.tolerance < 0:
        raise InvalidError("tolerance must be >= 0")
    if benchmark.scope != LIBRARY_SCOPE:
        find_capability_row(session, benchmark.scope)
    exists = session.scalar(
        select(SqlBenchmark.id).where(
            SqlBenchmark.name == benchmark.name, SqlBenchmark.version == benchmark.version
        )
    )
    conflict = f"benchmark {benchmark.name} v{benchmark.version} already exists"
    if exists:
        raise ConflictError(conflict)
    row = SqlBenchmark(created_by=actor.name, **vars(benchmark))
    insert_unique(session, row, conflict)
    append_event(
        session,
        actor=actor.name,
        action="benchmark.create",
        subject=f"benchmark:{benchmark.name}@{benchmark.version}",
        payload=vars(benchmark),
    )
    return to_benchmark(row)


def list_benchmarks(*, session: Session) -> list[Benchmark]:
    rows = session.scalars(select(SqlBenchmark).order_by(SqlBenchmark.name, SqlBenchmark.version))
    return [to_benchmark(r) for r in rows]


@dataclass(frozen=True)
class EvaluationDraft:
    benchmark: str
    benchmark_version: int
    score: float
    n: int
    library_digest: str | None = None
    adapter_id: int | None = None
    items_digest: str | None = None
    items: dict[str, float] | None = None
    provenance: dict[str, Any] = field(default_factory=dict)


def items_digest(items: Mapping[str, float]) -> str:
    """sha256 of the canonical JSON of per-item scores (sorted keys, no spaces)."""
    body = json.dumps(dict(items), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(body.encode()).hexdigest()


def _check_items(draft: EvaluationDraft) -> str | None:
    """The items' digest after checking them against n, score and a stated digest."""
    if draft.items is None:
        return draft.items_digest
    if len(draft.items) != draft.n:
        raise InvalidError(f"n is {draft.n} but {len(draft.items)} item scores were given")
    mean = math.fsum(draft.items.values()) / len(draft.items)
    if abs(mean - draft.score) > 1e-6 * max(1.0, abs(mean)):
        raise InvalidError(f"score {draft.score} is not the mean of the item scores ({mean})")
    digest = items_digest(draft.items)
    if draft.items_digest is not None and draft.items_digest != digest:
        raise InvalidError(f"items_digest {draft.items_digest} differs from the items' {digest}")
    return digest


def _check_provenance(bench: SqlBenchmark, provenance: Mapping[str, Any]) -> None:
    stated = provenance.get("dataset_digest")
    if stated is not None and stated != bench.dataset_digest:
        raise InvalidError(
            f"provenance.dataset_digest {stated} is not the dataset of "
            f"{bench.name} v{bench.version} ({bench.dataset_digest})"
        )


def _check_target(session: Session, bench: SqlBenchmark, draft: EvaluationDraft) -> None:
    if (draft.library_digest is None) == (draft.adapter_id is None):
        raise InvalidError("give exactly one of library_digest and adapter_id")
    if bench.scope == LIBRARY_SCOPE and draft.library_digest is None:
        raise InvalidError(f"benchmark {bench.name} has library scope: give library_digest")
    if bench.scope != LIBRARY_SCOPE:
        if draft.adapter_id is None:
            raise InvalidError(
                f"benchmark {bench.name} scores capability {bench.scope}: give adapter_id"
            )
        adapter = session.get(SqlAdapterVersion, draft.adapter_id)
        if adapter is None:
            raise NotFoundError(f"adapter {draft.adapter_id} not found")
        if adapter.capability.name != bench.scope:
            raise InvalidError(
                f"adapter {draft.adapter_id} is {adapter.capability.name}; "
                f"{bench.name} scores {bench.scope}"
            )


def create_evaluation(*, session: Session, actor: Principal, draft: EvaluationDraft) -> Evaluation:
    """Record a score of a benchmark on a library digest or an adapter."""
    _digest("library_digest", draft.library_digest)
    _digest("items_digest", draft.items_digest)
    bench = session.scalar(
        select(SqlBenchmark).where(
            SqlBenchmark.name == draft.benchmark, SqlBenchmark.version == draft.benchmark_version
        )
    )
    if bench is None:
        raise NotFoundError(f"benchmark {draft.benchmark} v{draft.benchmark_version} not found")
    _check_target(session, bench, draft)
    _check_provenance(bench, draft.provenance)
    row = SqlEvaluation(
        benchmark=bench,
        library_digest=draft.library_digest,
        adapter_id=draft.adapter_id,
        score=draft.score,
        n=draft.n,
        items_digest=_check_items(draft),
        items=draft.items,
        provenance=dict(draft.provenance),
        created_by=actor.name,
    )
    session.add(row)
    session.flush()
    evaluation = to_evaluation(row)
    append_event(
        session,
        actor=actor.name,
        action="evaluation.create",
        subject=f"evaluation:{evaluation.id}",
        payload={k: v for k, v in vars(draft).items() if k != "items"}
        | {"items_digest": evaluation.items_digest},
    )
    return evaluation


def list_evaluations(*, session: Session, benchmark: str | None = None) -> list[Evaluation]:
    query = select(SqlEvaluation).order_by(SqlEvaluation.id)
    if benchmark is not None:
        query = query.join(SqlEvaluation.benchmark).where(SqlBenchmark.name == benchmark)
    return [to_evaluation(r) for r in session.scalars(query)]


def get_evaluation(*, session: Session, evaluation_id: int) -> Evaluation:
    """One evaluation with its per-item scores."""
    row = session.get(SqlEvaluation, evaluation_id)
    if row is None:
        raise NotFoundError(f"evaluation {evaluation_id} not found")
    return to_evaluation(row, with_items=True)
