"""Reading and verifying the audit log."""

from __future__ import annotations

import threading

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.audit import Checkpoint, to_event, verify_events, verify_events_from
from registry.db.models import SqlEvent
from registry.domain import Event, VerifyReport
from registry.errors import InvalidError

MAX_EVENTS = 1000


def list_events(*, session: Session, after: int = 0, limit: int = 100) -> list[Event]:
    if not 1 <= limit <= MAX_EVENTS or after < 0:
        raise InvalidError(f"limit must be 1..{MAX_EVENTS} and after >= 0")
    rows = session.scalars(
        select(SqlEvent).where(SqlEvent.id > after).order_by(SqlEvent.id).limit(limit)
    )
    return [to_event(r) for r in rows]


def verify(*, session: Session) -> VerifyReport:
    """The whole chain recomputed (the audit page, `weact fsck`)."""
    return verify_events(session)


_checkpoints: dict[str, Checkpoint] = {}
_lock = threading.Lock()


def verify_new(*, session: Session) -> VerifyReport:
    """The chain verified up to its head, recomputing only the events appended since this
    process last verified it (after checking that the event it ended on is unchanged): what
    the overview shows on every load without rehashing the whole log. An older event
    rewritten since is found by `verify` (the audit page) and `weact fsck`."""
    key = session.get_bind().engine.url.render_as_string(hide_password=True)
    with _lock:
        checkpoint = _checkpoints.get(key)
    report, reached = verify_events_from(session, checkpoint)
    with _lock:
        if reached is None:
            _checkpoints.pop(key, None)
        else:
            _checkpoints[key] = reached
    return report
