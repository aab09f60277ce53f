"""The fleet as operators see it: each node's report set against its channel's head.

A node is `stale` when it says so (it cannot reach the registry and serves its last verified
library) or when its last heartbeat is older than `silent_s` (it stopped reporting at all).
`lag` is how many revisions the node's channel has moved past the one it serves.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.db.convert import to_node
from registry.db.models import SqlChannel, SqlNode, SqlRevision, utcnow
from registry.domain import Node, NodeStatus

NODE_SILENT_S = 60.0  # nodes heartbeat every 10 s by default


def channel_heads(*, session: Session) -> dict[str, int]:
    rows = session.execute(
        select(SqlChannel.name, func.max(SqlRevision.revision))
        .join(SqlRevision, SqlRevision.channel_id == SqlChannel.id)
        .group_by(SqlChannel.name)
    )
    return {str(name): int(head) for name, head in rows}


def node_status(
    node: Node, heads: dict[str, int], *, now: datetime, silent_s: float = NODE_SILENT_S
) -> NodeStatus:
    head = heads.get(node.channel)
    lag = None if head is None or node.revision is None else max(head - node.revision, 0)
    age = max((now - node.last_heartbeat).total_seconds(), 0.0)
    return NodeStatus(node, head, lag, age, node.stale or age > silent_s)


def status_of(*, session: Session, node: Node) -> NodeStatus:
    """One node's status (the answer to its heartbeat)."""
    return node_status(node, channel_heads(session=session), now=utcnow())


def fleet_status(*, session: Session, silent_s: float = NODE_SILENT_S) -> list[NodeStatus]:
    """Every node, by id, with its channel's head, lag, heartbeat age and staleness."""
    heads = channel_heads(session=session)
    now = utcnow()
    rows = session.scalars(select(SqlNode).order_by(SqlNode.id))
    return [node_status(to_node(r), heads, now=now, silent_s=silent_s) for r in rows]
