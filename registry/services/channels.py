"""Channels: append-only revisions of a whole library; promote, rollback, revoke-removal.

Every change appends revision N+1; ``unique(channel, revision)`` means two concurrent
writers cannot both create N+1. The loser retries on the new head (no lost update) unless
it stated ``expected_revision``, in which case it gets ``RevisionConflictError``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from registry.audit import append_event
from registry.db.convert import to_revision as revision_of
from registry.db.models import (
    SqlAdapterVersion,
    SqlBackbone,
    SqlChannel,
    SqlGateReport,
    SqlRevision,
)
from registry.domain import AdapterState, GateReport, Principal, PromoteResult, Revision
from registry.errors import (
    GateFailedError,
    IncompatibleAdapterError,
    InvalidError,
    InvalidStateError,
    NotFoundError,
    RevisionConflictError,
)
from registry.names import check_name
from registry.services.backbones import find_backbone_row
from registry.services.capabilities import find_capability_row
from registry.services.gate import evaluate_gate
from registry.services.library import library_digest, library_entry
from registry.services.retry import with_retries


@dataclass(frozen=True)
class PromoteRequest:
    channel: str
    backbone: str | None
    adapters: dict[str, int | None]
    order: list[str] | None
    expected_revision: int | None = None
    reason: str | None = None


@dataclass(frozen=True)
class _Plan:
    channel: SqlChannel | None
    backbone: SqlBackbone
    current: SqlRevision | None
    library: dict[str, Any]
    order: list[str]
    digest: str


# -- reading ---------------------------------------------------------------------------


def _channel_row(session: Session, name: str) -> SqlChannel | None:
    return session.scalar(select(SqlChannel).where(SqlChannel.name == name))


def _head(session: Session, channel: SqlChannel | None) -> SqlRevision | None:
    if channel is None:
        return None
    return session.scalar(
        select(SqlRevision)
        .where(SqlRevision.channel_id == channel.id)
        .order_by(SqlRevision.revision.desc())
        .limit(1)
    )


def get_revision(*, session: Session, channel: str) -> Revision:
    """The current revision of a channel."""
    head = _head(session, _channel_row(session, channel))
    if head is None:
        raise NotFoundError(f"channel {channel!r} has no revision yet")
    return revision_of(head)


def head_number(*, session: Session, channel: str) -> int:
    """The current revision number of a channel (0 when it has none): a cheap poll.

    ``NotFoundError`` when the channel does not exist at all.
    """
    number = session.scalar(
        select(func.max(SqlRevision.revision))
        .join(SqlRevision.channel)
        .where(SqlChannel.name == channel)
    )
    if number is None and _channel_row(session, channel) is None:
        raise NotFoundError(f"channel {channel!r} not found")
    return int(number or 0)


def list_channels(*, session: Session) -> list[Revision]:
    channels = session.scalars(select(SqlChannel).order_by(SqlChannel.name))
    heads = [_head(session, channel) for channel in channels]
    return [revision_of(h) for h in heads if h is not None]


def list_revisions(*, session: Session, channel: str) -> list[Revision]:
    row = _channel_row(session, channel)
    if row is None:
        raise NotFoundError(f"channel {channel!r} not found")
    rows = session.scalars(
        select(SqlRevision).where(SqlRevision.channel_id == row.id).order_by(SqlRevision.revision)
    )
    return [revision_of(r) for r in rows]


# -- planning a promotion --------------------------------------------------------------


def _promotable(session: Session, cap: str, adapter_id: int, backbone: SqlBackbone) -> Any:
    row = session.get(SqlAdapterVersion, adapter_id)
    if row is None:
        raise NotFoundError(f"adapter {adapter_id} not found")
    if row.capability.name != cap:
        raise InvalidError(f"adapter {adapter_id} is {row.capability.name}, not {cap!r}")
    if row.state != AdapterState.APPROVED.value:
        raise InvalidStateError(
            f"{row.capability.name}@{row.version} is {row.state}; only approved adapters"
        )
    if row.backbone_id != backbone.id:
        raise IncompatibleAdapterError(
            f"{row.capability.name}@{row.version} was trained on backbone {row.backbone.root}, "
            f"the channel serves {backbone.root}"
        )
    return library_entry(row)


def _backbone_of_adapters(session: Session, adapters: dict[str, int | None]) -> SqlBackbone:
    ids = [i for i in adapters.values() if i is not None]
    rows = [session.get(SqlAdapterVersion, i) for i in ids]
    backbones = {row.backbone_id: row.backbone for row in rows if row is not None}
    if len(backbones) != 1:
        raise InvalidError("backbone is required when the channel does not exist yet")
    return next(iter(backbones.values()))


def _resolve_backbone(
    session: Session, channel: SqlChannel | None, key: str | None, adapters: dict[str, int | None]
) -> SqlBackbone:
    """The channel's backbone; a new channel takes the given one, or its adapters' one."""
    if channel is None:
        if key is None:
            return _backbone_of_adapters(session, adapters)
        return find_backbone_row(session, key)
    if key is not None and find_backbone_row(session, key).id != channel.backbone_id:
        raise IncompatibleAdapterError(
            f"channel {channel.name!r} serves backbone {channel.backbone.root}, not {key}"
        )
    return channel.backbone


def _check_order(session: Session, order: list[str]) -> list[str]:
    if len(set(order)) != len(order):
        raise InvalidError(f"order lists a capability twice: {order}")
    for cap in order:
        find_capability_row(session, cap)
    return list(order)


def _plan(session: Session, request: PromoteRequest) -> _Plan:
    channel = _channel_row(session, request.channel)
    backbone = _resolve_backbone(session, channel, request.backbone, request.adapters)
    current = _head(session, channel)
    _check_expected(request.channel, current, request.expected_revision)
    library: dict[str, Any] = dict(current.library) if current is not None else {}
    for cap, adapter_id in sorted(request.adapters.items()):
        check_name("capability", cap)
        if adapter_id is None:
            if library.pop(cap, None) is None:
                raise InvalidError(f"capability {cap!r} is not in channel {request.channel!r}")
        else:
            library[cap] = _promotable(session, cap, adapter_id, backbone)
    current_order = list(current.order) if current is not None else []
    order = _check_order(session, request.order) if request.order is not None else current_order
    if current is not None and _same(library, order, current):
        raise InvalidError("the promotion changes nothing: the library is already current")
    digest = library_digest(backbone.root, library, order)
    return _Plan(channel, backbone, current, dict(sorted(library.items())), order, digest)


def _same(library: dict[str, Any], order: list[str], current: SqlRevision) -> bool:
    """Same adapter versions in the same order (equal weights under new ids still differ)."""
    ids = {cap: entry["adapter_id"] for cap, entry in library.items()}
    old = {cap: entry["adapter_id"] for cap, entry in current.library.items()}
    return ids == old and order == list(current.order)


def _check_expected(channel: str, current: SqlRevision | None, expected: int | None) -> None:
    number = current.revision if current is not None else 0
    if expected is not None and expected != number:
        raise RevisionConflictError(
            {
                "message": f"channel {channel!r} is at revision {number}, not {expected}",
                "current_revision": number,
                "expected_revision": expected,
            }
        )


# -- writing ---------------------------------------------------------------------------


def _ensure_channel(session: Session, name: str, backbone: SqlBackbone) -> SqlChannel:
    existing = _channel_row(session, name)
    if existing is not None:
        return existing
    row = SqlChannel(name=name, backbone=backbone)
    session.add(row)
    session.flush()
    return row


def _append(
    session: Session, plan: _Plan, name: str, actor: Principal, reason: str | None
) -> SqlRevision:
    channel = plan.channel or _ensure_channel(session, name, plan.backbone)
    row = SqlRevision(
        channel=channel,
        revision=(plan.current.revision if plan.current is not None else 0) + 1,
        library=plan.library,
        order=plan.order,
        library_digest=plan.digest,
        created_by=actor.name,
        reason=reason,
    )
    session.add(row)
    session.flush()
    return row


def _conflict_handler(expected: int | None) -> Any:
    def handle(exc: IntegrityError) -> None:
        if expected is not None:
            raise RevisionConflictError(
                {
                    "message": f"another revision was created concurrently; {expected} is stale",
                    "expected_revision": expected,
                }
            ) from exc

    return handle


def _record_gate(
    session: Session, plan: _Plan, name: str, gate: GateReport, actor: Principal
) -> None:
    session.add(
        SqlGateReport(
            channel=name,
            base_revision=plan.current.revision if plan.current is not None else 0,
            library_digest=plan.digest,
            passed=gate.passed,
            report=asdict(gate),
            created_by=actor.name,
        )
    )
    session.flush()


def dry_run_gate(*, session: Session, request: PromoteRequest) -> GateReport:
    """The gate report a promotion would get; writes nothing."""
    check_name("channel", request.channel)
    plan = _plan(session, request)
    return evaluate_gate(session, current=plan.current, library=plan.library, digest=plan.digest)


def promote(*, session: Session, actor: Principal, request: PromoteRequest) -> PromoteResult:
    """Append a revision with the merged library if the gate passes.

    A failing gate is recorded (gate report + event) and committed, then raised as
    ``GateFailedError``: the refusal itself is part of the audit trail.
    """
    check_name("channel", request.channel)

    def attempt() -> tuple[_Plan, GateReport, SqlRevision | None]:
        plan = _plan(session, request)
        gate = evaluate_gate(
            session, current=plan.current, library=plan.library, digest=plan.digest
        )
        if not gate.passed:
            return plan, gate, None
        return plan, gate, _append(session, plan, request.channel, actor, request.reason)

    handler = _conflict_handler(request.expected_revision)
    plan, gate, row = with_retries(session, attempt, on_conflict=handler)
    _record_gate(session, plan, request.channel, gate, actor)
    if row is None:
        append_event(
            session,
            actor=actor.name,
            action="channel.gate_failed",
            subject=f"channel:{request.channel}",
            payload={"library_digest": plan.digest, "gate": asdict(gate)},
        )
        session.commit()
        raise GateFailedError(asdict(gate))
    revision = revision_of(row)
    _revision_event(session, actor, "channel.promote", revision)
    return PromoteResult(revision=revision, gate=gate)


def _revision_event(session: Session, actor: Principal, action: str, revision: Revision) -> None:
    append_event(
        session,
        actor=actor.name,
        action=action,
        subject=f"channel:{revision.channel}",
        payload={
            "revision": revision.revision,
            "library": {cap: e.adapter_id for cap, e in revision.library.items()},
            "order": revision.order,
            "library_digest": revision.library_digest,
            "reason": revision.reason,
        },
    )


def _rollback_plan(
    session: Session, channel: str, target_number: int, expected: int | None
) -> _Plan:
    row = _channel_row(session, channel)
    if row is None:
        raise NotFoundError(f"channel {channel!r} not found")
    current = _head(session, row)
    _check_expected(channel, current, expected)
    target = session.scalar(
        select(SqlRevision).where(
            SqlRevision.channel_id == row.id, SqlRevision.revision == target_number
        )
    )
    if target is None or current is None or target_number >= current.revision:
        raise InvalidError(f"channel {channel!r} has no earlier revision {target_number}")
    for cap, entry in target.library.items():
        adapter = session.get(SqlAdapterVersion, entry["adapter_id"])
        if adapter is None or adapter.state != AdapterState.APPROVED.value:
            state = adapter.state if adapter is not None else "missing"
            raise InvalidStateError(
                f"revision {target_number} holds {entry['name']} ({cap}), now {state}"
            )
    return _Plan(
        row, row.backbone, current, dict(target.library), list(target.order), target.library_digest
    )


def rollback(
    *,
    session: Session,
    actor: Principal,
    channel: str,
    to_revision: int,
    expected_revision: int | None = None,
    reason: str | None = None,
) -> Revision:
    """Append a revision equal to an earlier one (its adapters must still be approved)."""
    check_name("channel", channel)
    why = reason or f"rollback to revision {to_revision}"

    def attempt() -> SqlRevision:
        plan = _rollback_plan(session, channel, to_revision, expected_revision)
        return _append(session, plan, channel, actor, why)

    row = with_retries(session, attempt, on_conflict=_conflict_handler(expected_revision))
    revision = revision_of(row)
    _revision_event(session, actor, "channel.rollback", revision)
    return revision


def remove_adapter_everywhere(
    *, session: Session, actor: Principal, adapter_id: int, reason: str
) -> list[Revision]:
    """A new revision without ``adapter_id`` in every channel whose head holds it."""
    created = []
    for channel in session.scalars(select(SqlChannel).order_by(SqlChannel.id)):

        def attempt(channel: SqlChannel = channel) -> SqlRevision | None:
            head = _head(session, channel)
            if head is None:
                return None
            library = {c: e for c, e in head.library.items() if e["adapter_id"] != adapter_id}
            if len(library) == len(head.library):
                return None
            digest = library_digest(channel.backbone.root, library, list(head.order))
            plan = _Plan(channel, channel.backbone, head, library, list(head.order), digest)
            return _append(session, plan, channel.name, actor, reason)

        row = with_retries(session, attempt)
        if row is not None:
            created.append(revision_of(row))
    return created


def revision_event(session: Session, actor: Principal, action: str, revision: Revision) -> None:
    _revision_event(session, actor, action, revision)
