"""Reading and verifying the audit log."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.audit import to_event, verify_events
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
    return verify_events(session)
