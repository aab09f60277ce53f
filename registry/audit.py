"""Hash-chained audit log: every state change appends one event in the same transaction.

``hash = sha256(prev_hash + canonical fields)``; the first event chains to ``GENESIS``.
Appends are serialised (PostgreSQL: a transaction-scoped advisory lock; SQLite: the single
``BEGIN IMMEDIATE`` writer) and ``events.prev_hash`` is unique, so the chain cannot fork.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from registry.db.models import SqlEvent, utcnow
from registry.domain import Event, VerifyReport

GENESIS = "0" * 64
CHAIN_LOCK_KEY = 0x57454143  # "WEAC"


def canonical_json(obj: Any) -> str:
    """Sorted keys, no spaces, UTF-8: the one serialisation that is hashed."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _timestamp(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_hash(
    *, prev_hash: str, actor: str, action: str, subject: str, payload: str, created_at: datetime
) -> str:
    fields = [actor, action, subject, payload, _timestamp(created_at)]
    body = prev_hash + canonical_json(fields)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def lock_chain(session: Session) -> None:
    """Serialise writers of the chain for the rest of this transaction (PostgreSQL)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": CHAIN_LOCK_KEY})


def to_event(row: SqlEvent) -> Event:
    return Event(
        id=row.id,
        actor=row.actor,
        action=row.action,
        subject=row.subject,
        payload=json.loads(row.payload),
        created_at=row.created_at,
        prev_hash=row.prev_hash,
        hash=row.hash,
    )


def append_event(
    session: Session, *, actor: str, action: str, subject: str, payload: dict[str, Any]
) -> Event:
    """Append one event after the current head of the chain."""
    lock_chain(session)
    last = session.scalar(select(SqlEvent.hash).order_by(SqlEvent.id.desc()).limit(1))
    prev_hash = last or GENESIS
    created_at = utcnow()
    body = canonical_json(payload)
    row = SqlEvent(
        actor=actor,
        action=action,
        subject=subject,
        payload=body,
        created_at=created_at,
        prev_hash=prev_hash,
        hash=event_hash(
            prev_hash=prev_hash,
            actor=actor,
            action=action,
            subject=subject,
            payload=body,
            created_at=created_at,
        ),
    )
    session.add(row)
    session.flush()
    return to_event(row)


def _broken(row: SqlEvent, expected_prev: str) -> str | None:
    if row.prev_hash != expected_prev:
        return f"event {row.id}: prev_hash does not match the hash of the event before it"
    recomputed = event_hash(
        prev_hash=row.prev_hash,
        actor=row.actor,
        action=row.action,
        subject=row.subject,
        payload=row.payload,
        created_at=row.created_at,
    )
    if recomputed != row.hash:
        return f"event {row.id}: stored hash does not match its contents"
    return None


@dataclass(frozen=True)
class Checkpoint:
    """The last event of a verified prefix of the chain: its id and hash, and how many
    events the prefix holds."""

    id: int
    hash: str
    count: int


def verify_events(session: Session) -> VerifyReport:
    """Recompute the chain from the start; report the first broken link."""
    return verify_events_from(session, None)[0]


def verify_events_from(
    session: Session, checkpoint: Checkpoint | None
) -> tuple[VerifyReport, Checkpoint | None]:
    """Recompute the chain after `checkpoint` (from the start when None), checking first
    that the checkpoint's event is still there with its hash; the report counts the whole
    chain, and the checkpoint returned is the new end of the verified prefix."""
    expected_prev, count, after = GENESIS, 0, 0
    if checkpoint is not None:
        stored = session.scalar(select(SqlEvent.hash).where(SqlEvent.id == checkpoint.id))
        if stored != checkpoint.hash:
            return verify_events_from(session, None)  # changed under us: start again
        expected_prev, count, after = checkpoint.hash, checkpoint.count, checkpoint.id
    rows = session.scalars(
        select(SqlEvent)
        .where(SqlEvent.id > after)
        .order_by(SqlEvent.id)
        .execution_options(yield_per=500)
    )
    last = checkpoint
    for row in rows:
        problem = _broken(row, expected_prev)
        if problem is not None:
            report = VerifyReport(ok=False, count=count, first_broken=row.id, detail=problem)
            return report, None
        expected_prev = row.hash
        count += 1
        last = Checkpoint(row.id, row.hash, count)
    report = VerifyReport(
        ok=True, count=count, first_broken=None, detail=f"{count} events verified"
    )
    return report, last
