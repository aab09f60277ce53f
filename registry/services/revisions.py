"""Reading channels and their revisions, and the locks that writers of a channel take.

Lock order, the same for every writer so that PostgreSQL never has to break a deadlock:
adapter rows first (a transition's ``UPDATE``, a promotion's ``FOR SHARE``, in id order),
then channel rows (``FOR UPDATE``, in id order), then the audit chain's advisory lock.
SQLite ignores the row locks: its writers are already serialised by ``BEGIN IMMEDIATE``.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.audit import append_event
from registry.db.convert import to_revision as revision_of
from registry.db.models import SqlAdapterVersion, SqlChannel, SqlRevision
from registry.domain import Principal, Revision
from registry.errors import InvalidError, NotFoundError
from registry.names import did_you_mean
from registry.services.capabilities import find_capability_row


def channel_row(session: Session, name: str) -> SqlChannel | None:
    return session.scalar(select(SqlChannel).where(SqlChannel.name == name))


def head_row(session: Session, channel: SqlChannel | None) -> SqlRevision | None:
    if channel is None:
        return None
    return session.scalar(
        select(SqlRevision)
        .where(SqlRevision.channel_id == channel.id)
        .order_by(SqlRevision.revision.desc())
        .limit(1)
    )


def lock_channel(session: Session, channel: SqlChannel) -> int:
    """Lock a channel row until the end of the transaction; its current head number.

    The number is read after the lock is granted, so it includes every revision committed
    by a writer that held the lock before us.
    """
    session.execute(
        select(SqlChannel.id).where(SqlChannel.id == channel.id).with_for_update()
    ).all()
    number = session.scalar(
        select(func.max(SqlRevision.revision)).where(SqlRevision.channel_id == channel.id)
    )
    return int(number or 0)


def lock_adapters(session: Session, ids: Iterable[int]) -> dict[int, SqlAdapterVersion]:
    """Share-lock adapter rows (in id order) and return them freshly read.

    A concurrent transition of one of them waits for our commit, and we see the state that
    any transition committed before us left.
    """
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    rows = session.scalars(
        select(SqlAdapterVersion)
        .where(SqlAdapterVersion.id.in_(wanted))
        .order_by(SqlAdapterVersion.id)
        .with_for_update(read=True, of=SqlAdapterVersion)
        .execution_options(populate_existing=True)
    )
    return {row.id: row for row in rows}


def missing_channel(session: Session, channel: str) -> NotFoundError:
    """`channel 'prdo' does not exist (did you mean 'prod'?)`."""
    known = session.scalars(select(SqlChannel.name))
    return NotFoundError(f"channel {channel!r} does not exist{did_you_mean(channel, known)}")


def existing_channel(session: Session, channel: str) -> SqlChannel:
    row = channel_row(session, channel)
    if row is None:
        raise missing_channel(session, channel)
    return row


def get_revision(*, session: Session, channel: str) -> Revision:
    """The current revision of a channel."""
    head = head_row(session, existing_channel(session, channel))
    if head is None:
        raise NotFoundError(f"channel {channel!r} has no revision yet")
    return revision_of(head)


def head_number(*, session: Session, channel: str) -> int:
    """The current revision number of a channel (0 when it has none): a cheap poll.

    ``NotFoundError`` when the channel does not exist at all.
    """
    number = session.scalar(
        select(func.max(SqlRevision.revision))
        .join(SqlRevision.channel)
        .where(SqlChannel.name == channel)
    )
    if number is None:
        existing_channel(session, channel)
    return int(number or 0)


def list_channels(*, session: Session) -> list[Revision]:
    channels = session.scalars(select(SqlChannel).order_by(SqlChannel.name))
    heads = [head_row(session, channel) for channel in channels]
    return [revision_of(h) for h in heads if h is not None]


def list_revisions(*, session: Session, channel: str) -> list[Revision]:
    row = existing_channel(session, channel)
    rows = session.scalars(
        select(SqlRevision).where(SqlRevision.channel_id == row.id).order_by(SqlRevision.revision)
    )
    return [revision_of(r) for r in rows]


def revision_event(session: Session, actor: Principal, action: str, revision: Revision) -> None:
    append_event(
        session,
        actor=actor.name,
        action=action,
        subject=f"channel:{revision.channel}",
        payload={
            "revision": revision.revision,
            "library": {cap: e.adapter_id for cap, e in revision.library.items()},
            "order": revision.order,
            "library_digest": revision.library_digest,
            "reason": revision.reason,
        },
    )


def order_missing(library: Iterable[str], order: Iterable[str]) -> list[str]:
    """The capabilities a hard order names that the library has no adapter for."""
    have = set(library)
    return [cap for cap in order if cap not in have]


def runnable_order(library: Iterable[str], order: Iterable[str]) -> list[str]:
    """The hard order a revision records: the given one without the capabilities its library
    lacks (a node runs the order's phases in turn and cannot run one it has no adapter for)."""
    have = set(library)
    return [cap for cap in order if cap in have]


def check_order(session: Session, order: list[str]) -> list[str]:
    """A hard order of known capabilities, each once."""
    if len(set(order)) != len(order):
        raise InvalidError(f"order lists a capability twice: {order}")
    for cap in order:
        find_capability_row(session, cap)
    return list(order)
