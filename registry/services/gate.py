"""Gathers the benchmarks and scores a promotion is judged on, then asks ``registry.gates``."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.db.convert import to_benchmark
from registry.db.models import SqlBenchmark, SqlEvaluation, SqlRevision
from registry.domain import GateReport
from registry.gates import judge, report
from registry.names import LIBRARY_SCOPE


def changed_capabilities(current: SqlRevision | None, library: dict[str, Any]) -> set[str]:
    """Capabilities whose adapter the promotion adds or replaces."""
    old = current.library if current is not None else {}
    return {
        cap
        for cap, entry in library.items()
        if old.get(cap, {}).get("adapter_id") != entry["adapter_id"]
    }


def _latest_benchmarks(session: Session, scopes: set[str]) -> list[SqlBenchmark]:
    latest = (
        select(SqlBenchmark.name, func.max(SqlBenchmark.version).label("version"))
        .group_by(SqlBenchmark.name)
        .subquery()
    )
    query = (
        select(SqlBenchmark)
        .join(
            latest,
            (SqlBenchmark.name == latest.c.name) & (SqlBenchmark.version == latest.c.version),
        )
        .where(SqlBenchmark.scope.in_(scopes))
        .order_by(SqlBenchmark.name)
    )
    return list(session.scalars(query))


def _score(session: Session, benchmark_id: int, **key: Any) -> float | None:
    column, value = next(iter(key.items()))
    if value is None:
        return None
    return session.scalar(
        select(SqlEvaluation.score)
        .where(SqlEvaluation.benchmark_id == benchmark_id, getattr(SqlEvaluation, column) == value)
        .order_by(SqlEvaluation.id.desc())
        .limit(1)
    )


def evaluate_gate(
    session: Session, *, current: SqlRevision | None, library: dict[str, Any], digest: str
) -> GateReport:
    """Judge every benchmark of a replaced capability, and of the whole library."""
    changed = changed_capabilities(current, library)
    checks = []
    for bench in _latest_benchmarks(session, changed | {LIBRARY_SCOPE}):
        if bench.scope == LIBRARY_SCOPE:
            baseline_key = current.library_digest if current is not None else None
            baseline = _score(session, bench.id, library_digest=baseline_key)
            candidate = _score(session, bench.id, library_digest=digest)
        else:
            old = (current.library if current is not None else {}).get(bench.scope)
            baseline = _score(session, bench.id, adapter_id=old["adapter_id"] if old else None)
            candidate = _score(session, bench.id, adapter_id=library[bench.scope]["adapter_id"])
        checks.append(judge(to_benchmark(bench), baseline, candidate))
    return report(checks)
