"""Optimistic writes: try in a SAVEPOINT, retry when a unique constraint says we lost a race.

Unique violations are translated here, where the service knows what the constraint means:
``insert_unique`` turns one into a ``ConflictError`` naming the thing that already exists;
``with_retries`` runs an attempt again (on the new state of the database) after a
violation or after the attempt found, under its locks, that what it planned on is stale.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from registry.db.models import Base
from registry.errors import ConflictError

logger = logging.getLogger(__name__)

T = TypeVar("T")
MAX_ATTEMPTS = 50


class StaleRead(Exception):
    """Raised inside an attempt whose reads were overtaken by a concurrent commit.

    ``with_retries`` rolls the attempt's savepoint back (releasing the row locks it took,
    so that lock order stays the same on the next try) and runs it again.
    """


def with_retries(
    session: Session,
    attempt: Callable[[], T],
    *,
    on_conflict: Callable[[IntegrityError], None] | None = None,
    attempts: int = MAX_ATTEMPTS,
) -> T:
    """Run ``attempt`` in a savepoint; on ``IntegrityError`` roll it back and run it again.

    ``on_conflict`` may raise a domain error instead of retrying (``raise ... from exc``).
    """
    for number in range(1, attempts + 1):
        try:
            with session.begin_nested():
                return attempt()
        except IntegrityError as exc:
            logger.debug("write conflict on attempt %d: %s", number, exc.orig)
            if on_conflict is not None:
                on_conflict(exc)
        except StaleRead as exc:
            logger.debug("stale read on attempt %d: %s", number, exc)
    raise ConflictError(f"gave up after {attempts} conflicting attempts; retry the request")


def insert_unique(session: Session, row: Base, conflict: str) -> None:
    """Insert ``row``; a unique violation (a concurrent twin won) is ``ConflictError``."""
    try:
        with session.begin_nested():
            session.add(row)
            session.flush()
    except IntegrityError as exc:
        raise ConflictError(conflict) from exc
