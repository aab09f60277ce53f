"""Adapters by the names people use: `write@2` (capability and version) or an id (`#6`).

A version number counts per capability and backbone, so `write@2` names one version on a
registry with one backbone; with several, the backbone (its root) picks one, and without it
an ambiguous name is an `InvalidError` naming the candidates by id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.db.convert import to_adapter
from registry.db.models import SqlAdapterVersion, SqlBackbone, SqlEvent
from registry.domain import AdapterVersion
from registry.errors import InvalidError, NotFoundError
from registry.names import parse_adapter_ref
from registry.services.adapters import find_adapter_row
from registry.services.capabilities import find_capability_row


def find_named_row(session: Session, name: str, backbone: str | None = None) -> SqlAdapterVersion:
    """The version `name` (`write@2`, `#6` or `6`) means; `NotFoundError` (with a "did you
    mean" for a misspelt capability) or `InvalidError` when it names none or several."""
    ref = parse_adapter_ref(name)
    if ref.id is not None:
        return find_adapter_row(session, ref.id)
    assert ref.capability is not None
    assert ref.version is not None
    capability = find_capability_row(session, ref.capability)
    query = select(SqlAdapterVersion).where(
        SqlAdapterVersion.capability_id == capability.id,
        SqlAdapterVersion.version == ref.version,
    )
    if backbone is not None:
        query = query.join(SqlAdapterVersion.backbone).where(SqlBackbone.root == backbone)
    rows = list(session.scalars(query.order_by(SqlAdapterVersion.id)))
    if not rows:
        newest = session.scalar(
            select(SqlAdapterVersion.version)
            .where(SqlAdapterVersion.capability_id == capability.id)
            .order_by(SqlAdapterVersion.version.desc())
            .limit(1)
        )
        known = f"the newest is {ref.capability}@{newest}" if newest else "it has no version"
        raise NotFoundError(f"adapter {ref} does not exist ({known})")
    if len(rows) > 1:
        ids = ", ".join(f"#{r.id} on {r.backbone.name}" for r in rows)
        raise InvalidError(
            f"adapter {ref} is ambiguous: {ids}; name the backbone, or the version by id"
        )
    return rows[0]


def resolve_adapter(*, session: Session, name: str, backbone: str | None = None) -> AdapterVersion:
    return with_approver(session, to_adapter(find_named_row(session, name, backbone)))


def with_approver(session: Session, adapter: AdapterVersion) -> AdapterVersion:
    """The version with `approved_by` from its approval event (a revoke keeps it)."""
    approver = session.scalar(
        select(SqlEvent.actor)
        .where(SqlEvent.subject == f"adapter:{adapter.id}", SqlEvent.action == "adapter.approve")
        .order_by(SqlEvent.id.desc())
        .limit(1)
    )
    return replace(adapter, approved_by=approver)


MAX_STATES = 1000  # ids per request of `adapter_states`


def adapter_states(session: Session, ids: Sequence[int]) -> dict[int, str]:
    """Id -> state of each of `ids` that names a version (ids that name none are left out):
    one query for what a server serving many versions checks every second."""
    if not 1 <= len(ids) <= MAX_STATES:
        raise InvalidError(f"give 1..{MAX_STATES} adapter ids")
    query = select(SqlAdapterVersion.id, SqlAdapterVersion.state)
    rows = session.execute(query.where(SqlAdapterVersion.id.in_(set(ids))))
    return {adapter_id: state for adapter_id, state in rows}
