"""Capabilities: the names of adapters (plan, search, write, ...) and the hard order."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.audit import append_event
from registry.db.convert import to_capability
from registry.db.models import SqlCapability
from registry.domain import Capability, Principal
from registry.errors import ConflictError, InvalidError, NotFoundError
from registry.names import check_name, did_you_mean
from registry.services.retry import insert_unique


def create_capability(
    *, session: Session, actor: Principal, name: str, description: str, order: int | None
) -> Capability:
    check_name("capability", name)
    if order is not None and order < 0:
        raise InvalidError("order must be a non-negative integer or null")
    conflict = f"capability {name!r} already exists"
    if session.scalar(select(SqlCapability.id).where(SqlCapability.name == name)):
        raise ConflictError(conflict)
    row = SqlCapability(name=name, description=description, order=order)
    insert_unique(session, row, conflict)
    append_event(
        session,
        actor=actor.name,
        action="capability.create",
        subject=f"capability:{name}",
        payload={"name": name, "description": description, "order": order},
    )
    return to_capability(row)


def find_capability_row(session: Session, name: str) -> SqlCapability:
    row = session.scalar(select(SqlCapability).where(SqlCapability.name == name))
    if row is None:
        known = session.scalars(select(SqlCapability.name))
        raise NotFoundError(f"capability {name!r} does not exist{did_you_mean(name, known)}")
    return row


def get_capability(*, session: Session, name: str) -> Capability:
    return to_capability(find_capability_row(session, name))


def list_capabilities(*, session: Session) -> list[Capability]:
    rows = session.scalars(select(SqlCapability).order_by(SqlCapability.id))
    return [to_capability(r) for r in rows]
