"""Signatures of adapter identities: stored and served; checked when the registry is strict.

The registry is not what makes a signature count (nodes check against their own copy of the
offline root: registry.trust). It stores every envelope whose statement names the adapter's
identity exactly, serves them with the version, and, in strict mode (`strict` on), refuses
a push or an approval whose signature does not meet the newest root it serves
(registry.services.trust_roots).

    add_signature(session=s, actor=p, adapter_id=7, envelope=env, root=None)
    list_signatures(session=s, adapter_id=7)
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.audit import append_event
from registry.auth import Permission, authorize
from registry.db.models import SqlAdapterSignature, SqlAdapterVersion
from registry.db.session import Database
from registry.domain import AdapterVersion, Principal
from registry.errors import ConflictError, InvalidError, UntrustedError
from registry.services.adapters import (
    AdapterDraft,
    find_adapter_row,
    record_adapter,
    verify_adapter,
)
from registry.trust import AdapterIdentity, TrustRoot, check_adapter
from registry.trust.policy import signers_of
from registry.trust.statements import APPROVE, KIND_OF, identity_of, parse_envelope
from storage import BlobStore, HeaderLimits

CONFIG_FILE = "adapter_config.json"


def identity_of_row(session: Session, row: SqlAdapterVersion) -> AdapterIdentity:
    parent = session.get(SqlAdapterVersion, row.parent_id) if row.parent_id else None
    return AdapterIdentity(
        capability=row.capability.name,
        manifest_root=row.manifest_root,
        backbone_root=row.backbone.root,
        parent=parent.manifest_root if parent is not None else None,
        config=str(row.files.get(CONFIG_FILE, "")),
    )


def add_signature(
    *,
    session: Session,
    actor: Principal,
    adapter_id: int,
    envelope: dict[str, Any],
    root: TrustRoot | None,
) -> dict[str, Any]:
    """Store `envelope` for the adapter; it must name the adapter's identity. With `root`
    (strict), a publisher's must verify against the root's publish role of the capability,
    an approver's against an approve role naming its key."""
    row = find_adapter_row(session, adapter_id)
    parsed = parse_envelope(envelope)
    predicate_type, named = identity_of(parsed)
    identity = identity_of_row(session, row)
    if named != identity:
        raise InvalidError(
            f"the signed statement names {named}, not adapter {adapter_id}'s {identity}"
        )
    kind = KIND_OF[predicate_type]
    authorize(actor, Permission.PUBLISH if kind == "publish" else Permission.APPROVE)
    if len(parsed.signatures) != 1:
        raise InvalidError("one signature per envelope")
    (keyid,) = parsed.signatures
    if root is not None:
        _check_strict(root, identity, kind, keyid, envelope)
    exists = session.scalar(
        select(SqlAdapterSignature.id).filter_by(adapter_id=adapter_id, kind=kind, keyid=keyid)
    )
    if exists is not None:
        raise ConflictError(f"adapter {adapter_id} already has a {kind} signature by {keyid}")
    session.add(
        SqlAdapterSignature(
            adapter_id=adapter_id, kind=kind, keyid=keyid, envelope=envelope, created_by=actor.name
        )
    )
    append_event(
        session,
        actor=actor.name,
        action=f"adapter.signed.{kind}",
        subject=f"adapter:{adapter_id}",
        payload={"keyid": keyid, "manifest_root": identity.manifest_root},
    )
    session.flush()
    return {"adapter_id": adapter_id, "kind": kind, "keyid": keyid}


def _check_strict(
    root: TrustRoot, identity: AdapterIdentity, kind: str, keyid: str, envelope: dict[str, Any]
) -> None:
    if kind == "publish":
        check_adapter(root, identity, None, [envelope])
        return
    roles = [root.role(name) for name in root.summary()["roles"] if name.startswith("approve:")]
    if not any(role is not None and keyid in role.keyids for role in roles):
        raise UntrustedError(f"key {keyid} is in no approve role of the root")
    if not _verifies(root, identity, keyid, envelope):
        raise UntrustedError(f"the approval by {keyid} does not verify")


def _verifies(root: TrustRoot, identity: AdapterIdentity, keyid: str, envelope: Any) -> bool:
    return keyid in signers_of(root, identity, APPROVE, {keyid}, [envelope])


def require_signed_push(root: TrustRoot | None, envelope: dict[str, Any] | None) -> None:
    """A strict registry refuses a push that carries no signature (before any write)."""
    if root is not None and envelope is None:
        raise UntrustedError("this registry is strict: sign the push (weact adapter push --key)")


def require_signed_approval(*, session: Session, root: TrustRoot | None, adapter_id: int) -> None:
    """A strict registry approves only an adapter with an approver's signature stored."""
    if root is None:
        return
    kinds = session.scalars(
        select(SqlAdapterSignature.kind).filter_by(adapter_id=adapter_id, kind="approve")
    )
    if next(iter(kinds), None) is None:
        raise UntrustedError(
            f"this registry is strict: sign the approval of {adapter_id} "
            "(weact adapter approve --key)"
        )


def list_signatures(*, session: Session, adapter_id: int) -> list[dict[str, Any]]:
    find_adapter_row(session, adapter_id)
    rows = session.scalars(
        select(SqlAdapterSignature)
        .filter_by(adapter_id=adapter_id)
        .order_by(SqlAdapterSignature.id)
    )
    return [
        {
            "kind": r.kind,
            "keyid": r.keyid,
            "envelope": r.envelope,
            "created_by": r.created_by,
            "created_at": r.created_at,
        }
        for r in rows
    ]


def register_signed_adapter(
    *,
    database: Database,
    store: BlobStore,
    actor: Principal,
    draft: AdapterDraft,
    limits: HeaderLimits,
    signature: dict[str, Any] | None,
    root: TrustRoot | None,
) -> AdapterVersion:
    """Register a push with its publisher's signature: the files are checked with no
    transaction open (`verify_adapter`), then the version and its signature are recorded in
    one write, so a signature that does not verify undoes the push. Strict (`root`) refuses a
    push without one."""
    require_signed_push(root, signature)
    verified = verify_adapter(database=database, store=store, draft=draft, limits=limits)
    with database.write() as session:
        created = record_adapter(session=session, store=store, actor=actor, verified=verified)
        if signature is not None:
            add_signature(
                session=session, actor=actor, adapter_id=created.id, envelope=signature, root=root
            )
        return created
