"""Adapter versions: register (with the fit checks), list, show, lineage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.audit import append_event
from registry.db.convert import to_adapter
from registry.db.models import SqlAdapterVersion, SqlBackbone, SqlCapability
from registry.domain import AdapterState, AdapterVersion, Lineage, Page, Principal
from registry.errors import (
    DigestMismatchError,
    IncompatibleAdapterError,
    InvalidError,
    NotFoundError,
)
from registry.services.backbones import backbone_manifest, find_backbone_row
from registry.services.blobs import require_blob
from registry.services.capabilities import find_capability_row
from registry.services.fit import check_fit, read_config
from registry.services.gc import guard_blobs
from registry.services.retry import with_retries
from storage import BlobStore, InvalidSafetensorsError, Manifest, manifest_of_stream
from storage import DigestMismatchError as StorageDigestMismatch

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"
REQUIRED_FILES = (CONFIG_FILE, WEIGHTS_FILE)
MAX_PAGE = 1000


@dataclass(frozen=True)
class AdapterDraft:
    """What a publisher sends; checked by ``register_adapter``."""

    capability: str
    backbone: str
    files: dict[str, str]
    parent_id: int | None = None
    label: str | None = None
    provenance: dict[str, Any] | None = None


def _check_files(store: BlobStore, files: dict[str, str]) -> None:
    missing = [name for name in REQUIRED_FILES if name not in files]
    if missing:
        raise InvalidError(f"files must include {list(REQUIRED_FILES)}; missing {missing}")
    for name, digest in sorted(files.items()):
        if "/" in name or "\\" in name or name.startswith(".") or not name:
            raise InvalidError(f"invalid file name {name!r}: plain file names only")
        require_blob(store=store, digest=digest, what=name)


def _read_manifest(store: BlobStore, digest: str) -> Manifest:
    try:
        with store.open(digest) as fh:
            return manifest_of_stream(fh, store.size(digest), label=WEIGHTS_FILE)
    except InvalidSafetensorsError as exc:
        raise IncompatibleAdapterError(f"{WEIGHTS_FILE} is not valid safetensors: {exc}") from exc
    except StorageDigestMismatch as exc:
        raise DigestMismatchError(f"stored blob {digest} is corrupted: {exc}") from exc


def _check_parent(
    session: Session, parent_id: int | None, capability: SqlCapability, backbone: SqlBackbone
) -> None:
    if parent_id is None:
        return
    parent = session.get(SqlAdapterVersion, parent_id)
    if parent is None:
        raise NotFoundError(f"parent adapter {parent_id} not found")
    if parent.capability_id != capability.id or parent.backbone_id != backbone.id:
        raise IncompatibleAdapterError(
            f"parent {parent.capability.name}@{parent.version} must have the same capability "
            f"({capability.name}) and backbone ({backbone.root})"
        )


def _next_version(session: Session, capability_id: int, backbone_id: int) -> int:
    current = session.scalar(
        select(func.max(SqlAdapterVersion.version)).where(
            SqlAdapterVersion.capability_id == capability_id,
            SqlAdapterVersion.backbone_id == backbone_id,
        )
    )
    return (current or 0) + 1


def register_adapter(
    *, session: Session, store: BlobStore, actor: Principal, draft: AdapterDraft
) -> AdapterVersion:
    """Check that the adapter fits its backbone and record it as the next version.

    Its blobs are checked under the gc lock (shared), held until the row is committed.
    """
    guard_blobs(session)
    capability = find_capability_row(session, draft.capability)
    backbone = find_backbone_row(session, draft.backbone)
    _check_files(store, draft.files)
    raw_config = read_config(store, draft.files[CONFIG_FILE])
    manifest = _read_manifest(store, draft.files[WEIGHTS_FILE])
    backbone_weights = backbone_manifest(store=store, manifest_digest=backbone.manifest_digest)
    config = check_fit(raw_config, manifest, backbone_weights).config
    _check_parent(session, draft.parent_id, capability, backbone)

    def insert() -> SqlAdapterVersion:
        row = SqlAdapterVersion(
            capability=capability,
            backbone=backbone,
            version=_next_version(session, capability.id, backbone.id),
            label=draft.label,
            parent_id=draft.parent_id,
            state=AdapterState.CANDIDATE.value,
            rank=config.r,
            alpha=config.alpha,
            target_modules=config.target_list,
            files=dict(sorted(draft.files.items())),
            manifest_root=manifest.root,
            provenance=draft.provenance or {},
            created_by=actor.name,
            created_by_id=actor.principal_id,
        )
        session.add(row)
        session.flush()
        return row

    row = with_retries(session, insert)
    adapter = to_adapter(row)
    append_event(
        session,
        actor=actor.name,
        action="adapter.register",
        subject=f"adapter:{adapter.id}",
        payload={
            "name": adapter.name,
            "backbone": adapter.backbone,
            "manifest_root": adapter.manifest_root,
            "files": adapter.files,
            "parent_id": adapter.parent_id,
        },
    )
    return adapter


def find_adapter_row(session: Session, adapter_id: int) -> SqlAdapterVersion:
    row = session.get(SqlAdapterVersion, adapter_id)
    if row is None:
        raise NotFoundError(f"adapter {adapter_id} not found")
    return row


def get_adapter(*, session: Session, adapter_id: int) -> AdapterVersion:
    return to_adapter(find_adapter_row(session, adapter_id))


def list_adapters(
    *,
    session: Session,
    capability: str | None = None,
    backbone: str | None = None,
    state: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> Page:
    """Adapters filtered by capability name, backbone root and state, oldest first."""
    if not 1 <= limit <= MAX_PAGE or offset < 0:
        raise InvalidError(f"limit must be 1..{MAX_PAGE} and offset >= 0")
    if state is not None and state not in {s.value for s in AdapterState}:
        raise InvalidError(f"unknown state {state!r}; one of {[s.value for s in AdapterState]}")
    query = select(SqlAdapterVersion)
    if capability is not None:
        query = query.join(SqlAdapterVersion.capability).where(SqlCapability.name == capability)
    if backbone is not None:
        query = query.join(SqlAdapterVersion.backbone).where(SqlBackbone.root == backbone)
    if state is not None:
        query = query.where(SqlAdapterVersion.state == state)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(query.order_by(SqlAdapterVersion.id).limit(limit).offset(offset))
    return Page(items=[to_adapter(r) for r in rows], total=total)


def _descendants(session: Session, root_id: int) -> list[SqlAdapterVersion]:
    found: list[SqlAdapterVersion] = []
    frontier = [root_id]
    while frontier:
        children = list(
            session.scalars(
                select(SqlAdapterVersion).where(SqlAdapterVersion.parent_id.in_(frontier))
            )
        )
        found.extend(children)
        frontier = [c.id for c in children]
    return sorted(found, key=lambda r: r.id)


def lineage(*, session: Session, adapter_id: int) -> Lineage:
    """Ancestors (oldest first), the adapter, and every descendant."""
    row = find_adapter_row(session, adapter_id)
    ancestors: list[SqlAdapterVersion] = []
    parent_id = row.parent_id
    while parent_id is not None:
        parent = find_adapter_row(session, parent_id)
        ancestors.append(parent)
        parent_id = parent.parent_id
    return Lineage(
        ancestors=[to_adapter(a) for a in reversed(ancestors)],
        adapter=to_adapter(row),
        descendants=[to_adapter(d) for d in _descendants(session, row.id)],
    )
