"""Who published an adapter version: the rule that four-eyes approval and tag changes share."""

from __future__ import annotations

from registry.db.models import SqlAdapterVersion
from registry.domain import Principal


def published_by(row: SqlAdapterVersion, actor: Principal) -> bool:
    """Whether ``actor`` is the principal that published ``row`` (identity, not name).

    Rows and callers without a principal id (in-process callers, rows that predate
    principals and had no matching token) fall back to comparing names.
    """
    if row.created_by_id is not None or actor.principal_id is not None:
        return row.created_by_id == actor.principal_id
    return row.created_by == actor.name
