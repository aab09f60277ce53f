"""Reads that no API route offers yet: gate reports, the newest events, per-adapter scores,
each benchmark's scores across the versions of a capability.

Every promotion records its gate report (``registry.services.channels``); these functions
hand them and the rest out as frozen objects for the web pages.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, aliased

from registry.audit import to_event
from registry.db.convert import to_evaluation
from registry.db.models import (
    SqlAdapterVersion,
    SqlBenchmark,
    SqlEvaluation,
    SqlEvent,
)
from registry.db.models import SqlGateReport as SqlGate
from registry.domain import Evaluation, Event, GateCheck, GateReport
from registry.errors import InvalidError

MAX_ROWS = 1000


@dataclass(frozen=True)
class GateRecord:
    """A gate report as it was recorded for a promotion (passed or refused)."""

    id: int
    channel: str
    base_revision: int
    library_digest: str
    report: GateReport
    created_by: str
    created_at: datetime


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_ROWS:
        raise InvalidError(f"limit must be 1..{MAX_ROWS}")


def _known(cls: type[Any], stored: dict[str, Any]) -> dict[str, Any]:
    """The stored fields that ``cls`` has (reports recorded by another version may differ)."""
    names = {f.name for f in fields(cls)}
    return {key: value for key, value in stored.items() if key in names}


def _gate_report(report: dict[str, Any]) -> GateReport:
    checks = [GateCheck(**_known(GateCheck, check)) for check in report.get("checks", [])]
    return GateReport(**{**_known(GateReport, report), "checks": checks})


def _gate_record(row: SqlGate) -> GateRecord:
    return GateRecord(
        id=row.id,
        channel=row.channel,
        base_revision=row.base_revision,
        library_digest=row.library_digest,
        report=_gate_report(row.report),
        created_by=row.created_by,
        created_at=row.created_at,
    )


def list_gate_reports(
    *,
    session: Session,
    channel: str | None = None,
    passed: bool | None = None,
    limit: int = 100,
) -> list[GateRecord]:
    """Recorded gate reports, newest first, optionally of one channel or one outcome."""
    _check_limit(limit)
    query = select(SqlGate)
    if channel is not None:
        query = query.where(SqlGate.channel == channel)
    if passed is not None:
        query = query.where(SqlGate.passed == passed)
    rows = session.scalars(query.order_by(SqlGate.id.desc()).limit(limit))
    return [_gate_record(row) for row in rows]


def newest_events(
    *,
    session: Session,
    before: int | None = None,
    limit: int = 50,
    action: str | None = None,
    actor: str | None = None,
    subject: str | None = None,
) -> list[Event]:
    """Audit events newest first, those with an id below ``before`` when it is given, of
    one ``action`` (``adapter.tag``; a prefix ending in ``.`` takes a family: ``adapter.``),
    one ``actor`` and one ``subject`` (``adapter:5``, ``channel:prod``) when given."""
    _check_limit(limit)
    query = select(SqlEvent)
    if before is not None:
        query = query.where(SqlEvent.id < before)
    if action is not None and action.endswith("."):
        query = query.where(SqlEvent.action.startswith(action, autoescape=True))
    elif action is not None:
        query = query.where(SqlEvent.action == action)
    if actor is not None:
        query = query.where(SqlEvent.actor == actor)
    if subject is not None:
        query = query.where(SqlEvent.subject == subject)
    rows = session.scalars(query.order_by(SqlEvent.id.desc()).limit(limit))
    return [to_event(row) for row in rows]


def adapter_evaluations(*, session: Session, adapter_id: int) -> list[Evaluation]:
    """The evaluations recorded for one adapter version, oldest first."""
    rows = session.scalars(
        select(SqlEvaluation)
        .where(SqlEvaluation.adapter_id == adapter_id)
        .order_by(SqlEvaluation.id)
    )
    return [to_evaluation(row) for row in rows]


@dataclass(frozen=True)
class ScorePoint:
    """One version's latest score on a benchmark (for a chart across versions)."""

    adapter_id: int
    version: int
    score: float


def score_series(*, session: Session, adapter_id: int) -> dict[str, list[ScorePoint]]:
    """``benchmark@version`` -> the latest score of each version of ``adapter_id``'s
    capability on its backbone, by version: one query over those versions' evaluations."""
    mine = aliased(SqlAdapterVersion)
    capability = select(mine.capability_id).where(mine.id == adapter_id).scalar_subquery()
    backbone = select(mine.backbone_id).where(mine.id == adapter_id).scalar_subquery()
    rows = session.execute(
        select(
            SqlBenchmark.name,
            SqlBenchmark.version,
            SqlAdapterVersion.id,
            SqlAdapterVersion.version,
            SqlEvaluation.score,
        )
        .join(SqlBenchmark, SqlEvaluation.benchmark_id == SqlBenchmark.id)
        .join(SqlAdapterVersion, SqlEvaluation.adapter_id == SqlAdapterVersion.id)
        .where(
            SqlAdapterVersion.capability_id == capability,
            SqlAdapterVersion.backbone_id == backbone,
        )
        .order_by(SqlEvaluation.id)
    )
    latest: dict[str, dict[int, ScorePoint]] = {}
    for benchmark, benchmark_version, adapter_id, version, score in rows:
        point = ScorePoint(adapter_id=adapter_id, version=version, score=score)
        latest.setdefault(f"{benchmark}@{benchmark_version}", {})[version] = point
    return {key: [points[v] for v in sorted(points)] for key, points in sorted(latest.items())}
