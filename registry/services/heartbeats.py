"""Runtime nodes report what they serve; a change of revision, audit result or staleness is
an event. `registry.services.fleet_health` sets the reports against the channels' heads.

A heartbeat is an upsert: concurrent first heartbeats of one node id all succeed, one of
them inserts the row (and writes the event), the others retry as updates of that row.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.audit import append_event
from registry.db.convert import to_node
from registry.db.models import SqlNode, utcnow
from registry.domain import Event, Node, Principal
from registry.names import check_name, check_node_id
from registry.services.retry import with_retries
from registry.services.tokens import bind_node


def heartbeat(
    *,
    session: Session,
    actor: Principal,
    node_id: str,
    channel: str,
    revision: int | None,
    audit: dict[str, Any],
    library_digest: str | None = None,
    stale: bool = False,
    lag: int | None = None,
    heartbeat_s: float | None = None,
) -> Node:
    check_node_id(node_id)
    check_name("channel", channel)
    bind_node(session=session, actor=actor, node_id=node_id)
    audit_ok = bool(audit.get("ok"))
    reported = (channel, revision, audit_ok, stale)

    def upsert() -> tuple[SqlNode, bool]:
        row = session.scalar(
            select(SqlNode)
            .where(SqlNode.id == node_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        changed = row is None or (row.channel, row.revision, row.audit_ok, row.stale) != reported
        if row is None:
            row = SqlNode(id=node_id)
            session.add(row)
        row.channel, row.revision, row.audit, row.audit_ok = channel, revision, audit, audit_ok
        row.library_digest, row.stale, row.lag = library_digest, stale, lag
        row.heartbeat_s = heartbeat_s
        row.last_heartbeat = utcnow()
        session.flush()
        return row, changed

    row, changed = with_retries(session, upsert)
    if changed:
        append_event(
            session,
            actor=actor.name,
            action="node.report",
            subject=f"node:{node_id}",
            payload={"channel": channel, "revision": revision, "audit": audit, "stale": stale},
        )
    return to_node(row)


def report_event(
    *, session: Session, actor: Principal, node_id: str, kind: str, adapter: str, detail: str
) -> Event:
    """A node's own report of something it refused (e.g. weights that failed their check at
    load): one audit event `node.<kind>` on `node:<id>`, under the node's bound token."""
    check_node_id(node_id)
    bind_node(session=session, actor=actor, node_id=node_id)
    return append_event(
        session,
        actor=actor.name,
        action=f"node.{kind}",
        subject=f"node:{node_id}",
        payload={"adapter": adapter, "detail": detail},
    )


def list_nodes(*, session: Session) -> list[Node]:
    return [to_node(r) for r in session.scalars(select(SqlNode).order_by(SqlNode.id))]
