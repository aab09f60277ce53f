"""Counts for the Prometheus endpoint, read at scrape time."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.db.models import SqlChannel, SqlEvent, SqlNode, SqlRevision
from registry.domain import RegistryStats
from registry.services import version_counts


def registry_stats(*, session: Session) -> RegistryStats:
    heads = session.execute(
        select(SqlChannel.name, func.max(SqlRevision.revision))
        .join(SqlRevision, SqlRevision.channel_id == SqlChannel.id)
        .group_by(SqlChannel.name)
    )
    nodes = session.execute(select(SqlNode.audit_ok, func.count()).group_by(SqlNode.audit_ok))
    return RegistryStats(
        adapters_by_state=version_counts.by_state(session=session),
        channel_revisions={str(name): int(rev) for name, rev in heads},
        nodes_by_audit={("ok" if ok else "failed"): int(n) for ok, n in nodes},
        events=int(session.scalar(select(func.count()).select_from(SqlEvent)) or 0),
    )
