"""A version's lineage: its ancestors (parent, grandparent, ...) and every descendant.

Each side is one recursive query (a common table expression, on SQLite and PostgreSQL), so a
chain a thousand versions deep costs three queries, not one per version.
"""

from __future__ import annotations

from sqlalchemy import literal, select
from sqlalchemy.orm import Session

from registry.db.convert import to_adapter
from registry.db.models import SqlAdapterVersion
from registry.domain import Lineage
from registry.services.adapters import find_adapter_row

MAX_DEPTH = 1_000_000  # a guard: parents are older versions, a chain cannot loop


def _ancestors(session: Session, row: SqlAdapterVersion) -> list[SqlAdapterVersion]:
    """The parent, its parent, ... (nearest first), in one recursive query."""
    if row.parent_id is None:
        return []
    versions = SqlAdapterVersion.__table__
    start = select(versions.c.id, versions.c.parent_id, literal(1).label("depth"))
    up = start.where(versions.c.id == row.parent_id).cte("ancestry", recursive=True)
    step = select(versions.c.id, versions.c.parent_id, (up.c.depth + 1).label("depth"))
    chain = up.union_all(
        step.join(up, versions.c.id == up.c.parent_id).where(up.c.depth < MAX_DEPTH)
    )
    found = session.scalars(
        select(SqlAdapterVersion)
        .join(chain, SqlAdapterVersion.id == chain.c.id)
        .order_by(chain.c.depth)
    )
    return list(found)


def _descendants(session: Session, root_id: int) -> list[SqlAdapterVersion]:
    """Every version below `root_id` (children, theirs, ...), by id, in one recursive query."""
    versions = SqlAdapterVersion.__table__
    start = select(versions.c.id).where(versions.c.parent_id == root_id)
    down = start.cte("descent", recursive=True)
    tree = down.union_all(select(versions.c.id).join(down, versions.c.parent_id == down.c.id))
    found = session.scalars(
        select(SqlAdapterVersion)
        .where(SqlAdapterVersion.id.in_(select(tree.c.id)))
        .order_by(SqlAdapterVersion.id)
    )
    return list(found)


def lineage(*, session: Session, adapter_id: int) -> Lineage:
    """Ancestors (oldest first), the adapter, and every descendant: three queries, however
    long the chain (parents are older versions, so the chain has no cycle)."""
    row = find_adapter_row(session, adapter_id)
    return Lineage(
        ancestors=[to_adapter(a) for a in reversed(_ancestors(session, row))],
        adapter=to_adapter(row),
        descendants=[to_adapter(d) for d in _descendants(session, row.id)],
    )
