"""Versions counted by capability and state, kept where versions are registered and decided.

`moved` is called in the transaction that registers a version or changes its state, after
that transaction's audit event: the event locked the chain (`registry.audit.lock_chain`),
so on PostgreSQL every writer of these rows already holds that lock and none ever waits on
another for them (SQLite has one writer at a time anyway). `counts` and `by_state` read
them: a few rows per capability, whatever the number of versions. `recount` derives the same
numbers from the versions themselves (fsck compares the two); `refill` rewrites the rows
from it, for a load that inserted versions in bulk.
"""

from __future__ import annotations

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from registry.db.models import SqlAdapterVersion, SqlCapability, SqlVersionCount

Counts = dict[tuple[int, str], int]  # (capability id, state) -> versions


def moved(session: Session, capability_id: int, source: str | None, target: str) -> None:
    """One version of `capability_id` entered `target`, from `source` (None: registered)."""
    table = SqlVersionCount
    if source is not None:
        session.execute(
            update(table)
            .where(table.capability_id == capability_id, table.state == source)
            .values(count=table.count - 1)
        )
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    add = dialect.insert(table).values(capability_id=capability_id, state=target, count=1)
    session.execute(
        add.on_conflict_do_update(
            index_elements=[table.capability_id, table.state], set_={"count": table.count + 1}
        )
    )


def counts(*, session: Session) -> dict[str, dict[str, int]]:
    """Capability name -> state -> versions in it (states with none left out)."""
    rows = session.execute(
        select(SqlCapability.name, SqlVersionCount.state, SqlVersionCount.count)
        .join(SqlCapability, SqlCapability.id == SqlVersionCount.capability_id)
        .where(SqlVersionCount.count > 0)
    )
    out: dict[str, dict[str, int]] = {}
    for name, state, count in rows:
        out.setdefault(str(name), {})[str(state)] = int(count)
    return out


def by_state(*, session: Session) -> dict[str, int]:
    """State -> versions in it, over every capability (states with none left out)."""
    rows = session.execute(
        select(SqlVersionCount.state, func.sum(SqlVersionCount.count))
        .group_by(SqlVersionCount.state)
        .having(func.sum(SqlVersionCount.count) > 0)
    )
    return {str(state): int(n) for state, n in rows}


def kept(*, session: Session) -> Counts:
    """The rows as they are (zeros left out)."""
    rows = session.execute(select(SqlVersionCount).where(SqlVersionCount.count != 0))
    return {(r.capability_id, r.state): r.count for r in rows.scalars()}


def recount(*, session: Session) -> Counts:
    """The same numbers counted from the versions (reads every version's index entry)."""
    version = SqlAdapterVersion
    rows = session.execute(
        select(version.capability_id, version.state, func.count()).group_by(
            version.capability_id, version.state
        )
    )
    return {(int(c), str(s)): int(n) for c, s, n in rows}


def refill(*, session: Session) -> None:
    """Rewrite the rows from the versions (after a bulk load that bypassed `moved`)."""
    session.execute(delete(SqlVersionCount))
    fresh = recount(session=session)
    if fresh:
        session.execute(
            insert(SqlVersionCount),
            [{"capability_id": c, "state": s, "count": n} for (c, s), n in fresh.items()],
        )
