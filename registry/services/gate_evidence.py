"""Gathers the benchmarks and trusted evaluations a promotion is judged on
(`registry.gate_rules` judges them).

Trust: an evaluation posted by a principal who published one of the adapters the promotion
brings in is ignored, for the baseline and the candidate alike (the author of a candidate
cannot post the scores that let it pass, nor lower the bar it is measured against). The
latest trusted evaluation of each side counts; the report names who evaluated.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.db.convert import to_benchmark
from registry.db.models import SqlAdapterVersion, SqlBenchmark, SqlEvaluation, SqlRevision
from registry.domain import GateReport, Scored
from registry.gate_rules import DEFAULT_SETTINGS, GateSettings, judge, report
from registry.names import LIBRARY_SCOPE


def changed_capabilities(current: SqlRevision | None, library: dict[str, Any]) -> set[str]:
    """Capabilities whose adapter the promotion adds or replaces."""
    old = current.library if current is not None else {}
    return {
        cap
        for cap, entry in library.items()
        if old.get(cap, {}).get("adapter_id") != entry["adapter_id"]
    }


def _latest_benchmarks(
    session: Session, scopes: set[str], names: set[str] | None = None
) -> list[SqlBenchmark]:
    """The latest version of each benchmark in `scopes` (or, with `names`, of those named)."""
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
        .where(
            SqlBenchmark.name.in_(names) if names is not None else SqlBenchmark.scope.in_(scopes)
        )
        .order_by(SqlBenchmark.name)
    )
    return list(session.scalars(query))


class _Side:
    """The latest trusted evaluation of one benchmark for one target, and what was ignored."""

    def __init__(self, session: Session, untrusted: set[str]) -> None:
        self.session = session
        self.untrusted = untrusted
        self.ignored: list[str] = []

    def find(self, benchmark_id: int, **key: Any) -> Scored | None:
        column, value = next(iter(key.items()))
        if value is None:
            return None
        rows = self.session.scalars(
            select(SqlEvaluation)
            .where(
                SqlEvaluation.benchmark_id == benchmark_id,
                getattr(SqlEvaluation, column) == value,
            )
            .order_by(SqlEvaluation.id.desc())
        )
        for row in rows:
            if row.created_by in self.untrusted:
                self.ignored.append(f"evaluation {row.id} by {row.created_by}")
                continue
            items = {str(k): float(v) for k, v in row.items.items()} if row.items else None
            return Scored(row.id, row.score, items, row.created_by)
        return None


def _publishers(session: Session, library: dict[str, Any], changed: set[str]) -> set[str]:
    ids = [library[cap]["adapter_id"] for cap in changed]
    if not ids:
        return set()
    rows = session.scalars(
        select(SqlAdapterVersion.created_by).where(SqlAdapterVersion.id.in_(ids))
    )
    return set(rows)


def _detail(side: _Side) -> str | None:
    if not side.ignored:
        return None
    return "ignored (posted by a publisher of an adapter this promotion brings in): " + ", ".join(
        side.ignored
    )


def evaluate_gate(
    session: Session,
    *,
    current: SqlRevision | None,
    library: dict[str, Any],
    digest: str,
    settings: GateSettings = DEFAULT_SETTINGS,
) -> GateReport:
    """Judge every benchmark of a replaced capability, of the whole library, and each one
    the channel requires (`weact channel require`): a required benchmark is judged whatever
    its scope, so a change it has no evaluation for fails as `missing`."""
    changed = changed_capabilities(current, library)
    untrusted = _publishers(session, library, changed)
    old_library = current.library if current is not None else {}
    checks = []
    benches = _latest_benchmarks(session, changed | {LIBRARY_SCOPE})
    required = set(current.channel.required_benchmarks or ()) if current is not None else set()
    benches += _latest_benchmarks(session, set(), required - {b.name for b in benches})
    for bench in benches:
        side = _Side(session, untrusted)
        if bench.scope == LIBRARY_SCOPE:
            baseline_key = current.library_digest if current is not None else None
            baseline = side.find(bench.id, library_digest=baseline_key)
            candidate = side.find(bench.id, library_digest=digest)
        else:
            old, new = old_library.get(bench.scope), library.get(bench.scope)
            baseline = side.find(bench.id, adapter_id=old["adapter_id"] if old else None)
            candidate = side.find(bench.id, adapter_id=new["adapter_id"] if new else None)
        checks.append(
            judge(to_benchmark(bench), baseline, candidate, settings, detail=_detail(side))
        )
    baseline_digest = current.library_digest if current is not None else None
    return report(checks, settings, library_digest=digest, baseline_library_digest=baseline_digest)
