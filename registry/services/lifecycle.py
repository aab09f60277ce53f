"""Adapter states: candidate -> approved | rejected; approved -> revoked. Nothing else.

A transition is one conditional update, ``UPDATE ... SET state = :target WHERE id = :id
AND state = :source``, whose row count says whether this request won: of any number of
racing approve/reject/revoke calls on one adapter exactly one changes the row (and writes
the one audit event); the others find it changed and get ``InvalidStateError`` (409).
On PostgreSQL the update's row lock also orders a revoke against promotions that lock the
same adapter (``FOR SHARE``), see ``registry.services.channels``.
"""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from registry.audit import append_event
from registry.db.convert import to_adapter
from registry.db.models import SqlAdapterVersion, utcnow
from registry.domain import AdapterState, AdapterVersion, Principal, Revision
from registry.errors import ForbiddenError, InvalidStateError
from registry.services import version_counts
from registry.services.adapters import find_adapter_row
from registry.services.channels import remove_adapter_everywhere, revision_event
from registry.services.ownership import published_by

TRANSITIONS: dict[tuple[AdapterState, AdapterState], str] = {
    (AdapterState.CANDIDATE, AdapterState.APPROVED): "adapter.approve",
    (AdapterState.CANDIDATE, AdapterState.REJECTED): "adapter.reject",
    (AdapterState.APPROVED, AdapterState.REVOKED): "adapter.revoke",
}
SOURCE: dict[AdapterState, AdapterState] = {target: source for source, target in TRANSITIONS}


def _transition(
    session: Session,
    adapter_id: int,
    target: AdapterState,
    actor: Principal,
    reason: str | None,
) -> tuple[SqlAdapterVersion, str]:
    source = SOURCE[target]
    result = session.execute(
        update(SqlAdapterVersion)
        .where(SqlAdapterVersion.id == adapter_id, SqlAdapterVersion.state == source.value)
        .values(state=target.value, decided_by=actor.name, decided_at=utcnow(), reason=reason)
        .execution_options(synchronize_session=False)
    )
    row = session.scalars(
        select(SqlAdapterVersion)
        .where(SqlAdapterVersion.id == adapter_id)
        .execution_options(populate_existing=True)
    ).one()
    if result.rowcount != 1:  # type: ignore[attr-defined]
        raise InvalidStateError(
            f"{row.capability.name}@{row.version} is {row.state}; cannot become {target.value}"
        )
    return row, TRANSITIONS[(source, target)]


def _event(
    session: Session, actor: Principal, action: str, row: SqlAdapterVersion
) -> AdapterVersion:
    adapter = to_adapter(row)
    append_event(
        session,
        actor=actor.name,
        action=action,
        subject=f"adapter:{adapter.id}",
        payload={"name": adapter.name, "state": adapter.state.value, "reason": row.reason},
    )
    version_counts.moved(session, row.capability_id, SOURCE[adapter.state].value, row.state)
    return adapter


def approve_adapter(
    *, session: Session, actor: Principal, adapter_id: int, reason: str | None = None
) -> AdapterVersion:
    """Approve a candidate; nobody approves what they published themselves."""
    row = find_adapter_row(session, adapter_id)
    if published_by(row, actor):
        raise ForbiddenError(
            f"{actor.name!r} published {row.capability.name}@{row.version} and cannot approve it"
        )
    row, action = _transition(session, adapter_id, AdapterState.APPROVED, actor, reason)
    return _event(session, actor, action, row)


def reject_adapter(
    *, session: Session, actor: Principal, adapter_id: int, reason: str | None = None
) -> AdapterVersion:
    find_adapter_row(session, adapter_id)
    row, action = _transition(session, adapter_id, AdapterState.REJECTED, actor, reason)
    return _event(session, actor, action, row)


def revoke_adapter(
    *, session: Session, actor: Principal, adapter_id: int, reason: str | None = None
) -> AdapterVersion:
    """Revoke an approved adapter and, in the same transaction, take it out of every
    channel whose head serves it (a new revision per channel, reason ``revoke <name>``)."""
    return revoke_adapter_moving_heads(
        session=session, actor=actor, adapter_id=adapter_id, reason=reason
    )[0]


def revoke_adapter_moving_heads(
    *, session: Session, actor: Principal, adapter_id: int, reason: str | None = None
) -> tuple[AdapterVersion, list[Revision]]:
    """`revoke_adapter`, with the channel revisions it appended (one per channel moved)."""
    find_adapter_row(session, adapter_id)
    row, action = _transition(session, adapter_id, AdapterState.REVOKED, actor, reason)
    name = f"{row.capability.name}@{row.version}"
    why = f"revoke {name}" + (f": {reason}" if reason else "")
    revisions = remove_adapter_everywhere(
        session=session, actor=actor, adapter_id=row.id, reason=why
    )
    adapter = _event(session, actor, action, row)
    for revision in revisions:
        revision_event(session, actor, "channel.revoke", revision)
    return adapter, revisions
