"""The benchmarks a channel requires: every promotion's gate judges each of them (one with
no evaluation for the change fails as `missing`), so a gate cannot pass by judging nothing.

A new channel requires none (its first promotions work before any benchmark exists); an
approver sets them with `weact channel require prod research-em ...` (none: clears them).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.audit import append_event
from registry.db.convert import to_revision
from registry.db.models import SqlBenchmark
from registry.domain import Principal, Revision
from registry.errors import NotFoundError
from registry.names import check_name, did_you_mean
from registry.services.revisions import existing_channel, head_row, lock_channel


def require_benchmarks(
    *, session: Session, actor: Principal, channel: str, benchmarks: Sequence[str]
) -> Revision:
    """Set the benchmarks `channel` requires (each must exist); its head, showing them."""
    check_name("channel", channel)
    row = existing_channel(session, channel)
    known = set(session.scalars(select(SqlBenchmark.name)))
    for name in benchmarks:
        if name not in known:
            raise NotFoundError(f"benchmark {name!r} does not exist{did_you_mean(name, known)}")
    lock_channel(session, row)
    row.required_benchmarks = sorted(set(benchmarks))
    append_event(
        session,
        actor=actor.name,
        action="channel.require",
        subject=f"channel:{channel}",
        payload={"channel": channel, "benchmarks": row.required_benchmarks},
    )
    head = head_row(session, row)
    if head is None:
        raise NotFoundError(f"channel {channel!r} has no revision yet")
    return to_revision(head)
