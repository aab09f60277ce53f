"""Channels: append-only revisions of a whole library; promote, rollback, revoke-removal.

Every change appends revision N+1. A writer plans on what it reads, then, before writing,
locks what the plan depends on (``registry.services.revisions`` gives the lock order):
every adapter of the new library (``FOR SHARE``: each must still be approved, checked in
the transaction that writes the revision) and the channel row (``FOR UPDATE``: its head
must still be the planned one). A stale plan is made again on the new head (no lost
update) unless the caller stated ``expected_revision``: then ``RevisionConflictError``.
``unique(channel, revision)`` and ``unique(channel.name)`` remain the last line for the
creation of a new channel, which has no row to lock yet.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import select
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
from registry.services.adapters import backbone_of_adapters
from registry.services.backbones import find_backbone_row
from registry.services.gate_evidence import evaluate_gate
from registry.services.library import library_digest, library_entry
from registry.services.retry import StaleRead, with_retries
from registry.services.revisions import (
    channel_row,
    check_order,
    existing_channel,
    get_revision,
    head_number,
    head_row,
    list_channels,
    list_revisions,
    lock_adapters,
    lock_channel,
    missing_channel,
    revision_event,
    runnable_order,
)

__all__ = [
    "PromoteRequest",
    "dry_run_gate",
    "get_revision",
    "head_number",
    "list_channels",
    "list_revisions",
    "promote",
    "remove_adapter_everywhere",
    "revision_event",
    "rollback",
]


@dataclass(frozen=True)
class PromoteRequest:
    channel: str
    backbone: str | None
    adapters: dict[str, int | None]
    order: list[str] | None
    expected_revision: int | None = None
    reason: str | None = None
    create: bool = False  # a channel that does not exist is created only when asked


@dataclass(frozen=True)
class _Plan:
    channel: SqlChannel | None
    backbone: SqlBackbone
    current: SqlRevision | None
    library: dict[str, Any]
    order: list[str]
    digest: str


# -- planning a promotion --------------------------------------------------------------


def _promotable(session: Session, cap: str, adapter_id: int, backbone: SqlBackbone) -> Any:
    row = session.get(SqlAdapterVersion, adapter_id)
    if row is None:
        raise NotFoundError(f"adapter #{adapter_id} does not exist")
    name = f"{row.capability.name}@{row.version}"
    if row.capability.name != cap:
        raise InvalidError(f"adapter {name} is a {row.capability.name} adapter, not {cap!r}")
    if row.state != AdapterState.APPROVED.value:
        raise InvalidStateError(
            f"cannot promote {name}: it is {row.state}, and a channel serves only approved adapters"
        )
    if row.backbone_id != backbone.id:
        raise IncompatibleAdapterError(
            f"{row.capability.name}@{row.version} was trained on backbone {row.backbone.root}, "
            f"the channel serves {backbone.root}"
        )
    return library_entry(row)


def _resolve_backbone(
    session: Session, channel: SqlChannel | None, request: PromoteRequest
) -> SqlBackbone:
    """The channel's backbone; a new channel takes the given one, or its adapters' one."""
    key = request.backbone
    if channel is None:
        if key is not None:
            return find_backbone_row(session, key)
        backbone = backbone_of_adapters(session, request.adapters.values())
        if backbone is None:  # nothing to create it from: the channel is still not there
            raise NotFoundError(
                f"channel {request.channel!r} does not exist yet: name its backbone"
            )
        return backbone
    if key is not None and find_backbone_row(session, key).id != channel.backbone_id:
        raise IncompatibleAdapterError(
            f"channel {channel.name!r} serves backbone {channel.backbone.root}, not {key}"
        )
    return channel.backbone


def _plan(session: Session, request: PromoteRequest) -> _Plan:
    channel = channel_row(session, request.channel)
    if channel is None and not request.create:
        missing = missing_channel(session, request.channel).detail
        raise NotFoundError(f"{missing}; create it explicitly: `weact channel promote --create`")
    backbone = _resolve_backbone(session, channel, request)
    current = head_row(session, channel)
    number = current.revision if current is not None else 0
    _check_expected(request.channel, number, request.expected_revision)
    library: dict[str, Any] = dict(current.library) if current is not None else {}
    for cap, adapter_id in sorted(request.adapters.items()):
        check_name("capability", cap)
        if adapter_id is None:
            if library.pop(cap, None) is None:
                raise InvalidError(f"capability {cap!r} is not in channel {request.channel!r}")
        else:
            library[cap] = _promotable(session, cap, adapter_id, backbone)
    current_order = list(current.order) if current is not None else []
    order = check_order(session, request.order) if request.order is not None else current_order
    order = runnable_order(library, order)
    if current is not None and _same(library, order, current):
        raise InvalidError("the promotion changes nothing: the library is already current")
    digest = library_digest(backbone.root, library, order)
    return _Plan(channel, backbone, current, dict(sorted(library.items())), order, digest)


def _same(library: dict[str, Any], order: list[str], current: SqlRevision) -> bool:
    """Same adapter versions in the same order (equal weights under new ids still differ)."""
    ids = {cap: entry["adapter_id"] for cap, entry in library.items()}
    old = {cap: entry["adapter_id"] for cap, entry in current.library.items()}
    return ids == old and order == list(current.order)


def _check_expected(channel: str, number: int, expected: int | None) -> None:
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
    existing = channel_row(session, name)
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


def _lock_plan(session: Session, plan: _Plan, named: set[int], expected: int | None) -> None:
    """Lock what ``plan`` relies on and check it still holds; ``StaleRead`` if overtaken.

    Every adapter of the new library must still be approved: one the request names is
    ``InvalidStateError``; one carried over from the head was taken out of the channel by
    a revoke that committed after we read the head, so the plan is stale.
    """
    rows = lock_adapters(session, (entry["adapter_id"] for entry in plan.library.values()))
    for cap, entry in sorted(plan.library.items()):
        row = rows.get(entry["adapter_id"])
        if row is not None and row.state == AdapterState.APPROVED.value:
            continue
        if entry["adapter_id"] not in named:
            raise StaleRead(f"{entry['name']} left channel {cap!r} meanwhile")
        state = row.state if row is not None else "missing"
        raise InvalidStateError(
            f"{entry['name']} ({cap}) is {state}; only approved adapters can be served"
        )
    if plan.channel is None:
        return  # a new channel: unique(channels.name) decides between racing creators
    head = lock_channel(session, plan.channel)
    planned = plan.current.revision if plan.current is not None else 0
    if head != planned:
        _check_expected(plan.channel.name, head, expected)
        raise StaleRead(f"channel {plan.channel.name!r} moved from {planned} to {head}")


def promote(*, session: Session, actor: Principal, request: PromoteRequest) -> PromoteResult:
    """Append a revision with the merged library if the gate passes.

    A failing gate is recorded (gate report + event) and committed, then raised as
    ``GateFailedError``: the refusal itself is part of the audit trail.
    """
    check_name("channel", request.channel)
    named = {i for i in request.adapters.values() if i is not None}

    def attempt() -> tuple[_Plan, GateReport, SqlRevision | None]:
        plan = _plan(session, request)
        _lock_plan(session, plan, named, request.expected_revision)
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
    revision_event(session, actor, "channel.promote", revision)
    return PromoteResult(revision=revision, gate=gate)


def _rollback_plan(
    session: Session, channel: str, target_number: int, expected: int | None
) -> _Plan:
    row = existing_channel(session, channel)
    current = head_row(session, row)
    _check_expected(channel, current.revision if current is not None else 0, expected)
    target = session.scalar(
        select(SqlRevision).where(
            SqlRevision.channel_id == row.id, SqlRevision.revision == target_number
        )
    )
    if target is None or current is None or target_number >= current.revision:
        raise InvalidError(f"channel {channel!r} has no earlier revision {target_number}")
    order = runnable_order(target.library, target.order)
    digest = library_digest(row.backbone.root, target.library, order)
    return _Plan(row, row.backbone, current, dict(target.library), order, digest)


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
        named = {entry["adapter_id"] for entry in plan.library.values()}
        try:
            _lock_plan(session, plan, named, expected_revision)
        except InvalidStateError as exc:
            raise InvalidStateError(f"revision {to_revision}: {exc.detail}") from exc
        return _append(session, plan, channel, actor, why)

    row = with_retries(session, attempt, on_conflict=_conflict_handler(expected_revision))
    revision = revision_of(row)
    revision_event(session, actor, "channel.rollback", revision)
    return revision


def remove_adapter_everywhere(
    *, session: Session, actor: Principal, adapter_id: int, reason: str
) -> list[Revision]:
    """A new revision without ``adapter_id`` in every channel whose head holds it, its hard
    order without the capabilities it then lacks (a revoke is never refused).

    Called by a revoke after its conditional update locked the adapter row; each channel is
    locked before its head is read, so a promotion that committed meanwhile is seen.
    """
    created = []
    for channel in session.scalars(select(SqlChannel).order_by(SqlChannel.id)):

        def attempt(channel: SqlChannel = channel) -> SqlRevision | None:
            lock_channel(session, channel)
            head = head_row(session, channel)
            if head is None:
                return None
            library = {c: e for c, e in head.library.items() if e["adapter_id"] != adapter_id}
            if len(library) == len(head.library):
                return None
            order = runnable_order(library, head.order)
            digest = library_digest(channel.backbone.root, library, order)
            plan = _Plan(channel, channel.backbone, head, library, order, digest)
            why = reason + (f"; order now {' -> '.join(order)}" if order != head.order else "")
            return _append(session, plan, channel.name, actor, why)

        row = with_retries(session, attempt)
        if row is not None:
            created.append(revision_of(row))
    return created
