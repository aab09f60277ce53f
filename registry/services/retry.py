"""Optimistic writes: try in a SAVEPOINT, retry when a unique constraint says we lost a race."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from registry.errors import ConflictError

logger = logging.getLogger(__name__)

T = TypeVar("T")
MAX_ATTEMPTS = 50


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
    raise ConflictError(f"gave up after {attempts} conflicting attempts; retry the request")
