"""Adapter states: candidate -> approved | rejected; approved -> revoked. Nothing else."""

from __future__ import annotations

from sqlalchemy.orm import Session

from registry.audit import append_event
from registry.db.convert import to_adapter
from registry.db.models import SqlAdapterVersion, utcnow
from registry.domain import AdapterState, AdapterVersion, Principal
from registry.errors import ForbiddenError, InvalidStateError
from registry.services.adapters import find_adapter_row
from registry.services.channels import remove_adapter_everywhere, revision_event

TRANSITIONS: dict[tuple[AdapterState, AdapterState], str] = {
    (AdapterState.CANDIDATE, AdapterState.APPROVED): "adapter.approve",
    (AdapterState.CANDIDATE, AdapterState.REJECTED): "adapter.reject",
    (AdapterState.APPROVED, AdapterState.REVOKED): "adapter.revoke",
}


def _transition(
    session: Session,
    row: SqlAdapterVersion,
    target: AdapterState,
    actor: Principal,
    reason: str | None,
) -> str:
    current = AdapterState(row.state)
    action = TRANSITIONS.get((current, target))
    if action is None:
        raise InvalidStateError(
            f"{row.capability.name}@{row.version} is {current.value}; cannot become {target.value}"
        )
    row.state = target.value
    row.decided_by = actor.name
    row.decided_at = utcnow()
    row.reason = reason
    session.flush()
    return action


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
    return adapter


def approve_adapter(
    *, session: Session, actor: Principal, adapter_id: int, reason: str | None = None
) -> AdapterVersion:
    """Approve a candidate; nobody approves what they published themselves."""
    row = find_adapter_row(session, adapter_id)
    if row.created_by == actor.name:
        raise ForbiddenError(
            f"{actor.name!r} published {row.capability.name}@{row.version} and cannot approve it"
        )
    action = _transition(session, row, AdapterState.APPROVED, actor, reason)
    return _event(session, actor, action, row)


def reject_adapter(
    *, session: Session, actor: Principal, adapter_id: int, reason: str | None = None
) -> AdapterVersion:
    row = find_adapter_row(session, adapter_id)
    action = _transition(session, row, AdapterState.REJECTED, actor, reason)
    return _event(session, actor, action, row)


def revoke_adapter(
    *, session: Session, actor: Principal, adapter_id: int, reason: str | None = None
) -> AdapterVersion:
    """Revoke an approved adapter and take it out of every channel that serves it."""
    row = find_adapter_row(session, adapter_id)
    action = _transition(session, row, AdapterState.REVOKED, actor, reason)
    name = f"{row.capability.name}@{row.version}"
    why = f"revoke {name}" + (f": {reason}" if reason else "")
    revisions = remove_adapter_everywhere(
        session=session, actor=actor, adapter_id=row.id, reason=why
    )
    adapter = _event(session, actor, action, row)
    for revision in revisions:
        revision_event(session, actor, "channel.revoke", revision)
    return adapter
