"""The fleet as operators see it: each node's report set against its channel's head.

A node is `stale` when it says so (it cannot reach the registry and serves its last verified
library) or when it missed 2 heartbeats: its last one is older than `MISSED_HEARTBEATS` times
the interval it states in each heartbeat (`heartbeat_s`; `DEFAULT_HEARTBEAT_S` for a node
that states none), so a dead node shows stale after 20 s at the default 10 s interval.
`lag` is how many revisions the node's channel has moved past the one it serves.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.db.convert import to_node
from registry.db.models import SqlChannel, SqlNode, SqlRevision, utcnow
from registry.domain import Node, NodeStatus

MISSED_HEARTBEATS = 2
DEFAULT_HEARTBEAT_S = 10.0  # `weact runtime serve --heartbeat`'s default


def silent_after(node: Node) -> float:
    """Seconds without a heartbeat after which `node` is stale: 2 of its intervals."""
    return MISSED_HEARTBEATS * (node.heartbeat_s or DEFAULT_HEARTBEAT_S)


def channel_heads(*, session: Session) -> dict[str, int]:
    rows = session.execute(
        select(SqlChannel.name, func.max(SqlRevision.revision))
        .join(SqlRevision, SqlRevision.channel_id == SqlChannel.id)
        .group_by(SqlChannel.name)
    )
    return {str(name): int(head) for name, head in rows}


def node_status(
    node: Node, heads: dict[str, int], *, now: datetime, silent_s: float | None = None
) -> NodeStatus:
    """`silent_s`: how long a silence makes the node stale (default: `silent_after`)."""
    head = heads.get(node.channel)
    lag = None if head is None or node.revision is None else max(head - node.revision, 0)
    age = max((now - node.last_heartbeat).total_seconds(), 0.0)
    silent = silent_after(node) if silent_s is None else silent_s
    return NodeStatus(node, head, lag, age, node.stale or age > silent)


def status_of(*, session: Session, node: Node) -> NodeStatus:
    """One node's status (the answer to its heartbeat)."""
    return node_status(node, channel_heads(session=session), now=utcnow())


def fleet_status(*, session: Session, silent_s: float | None = None) -> list[NodeStatus]:
    """Every node, by id, with its channel's head, lag, heartbeat age and staleness."""
    heads = channel_heads(session=session)
    now = utcnow()
    rows = session.scalars(select(SqlNode).order_by(SqlNode.id))
    return [node_status(to_node(r), heads, now=now, silent_s=silent_s) for r in rows]
