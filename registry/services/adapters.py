"""Adapter versions: register (with the fit checks), list and search, show, lineage.

A version's files are its PEFT pair (`adapter_config.json`, `adapter_model.safetensors`)
and, when the directory has them, its model card (`README.md`, also kept as text for search
and the web UI) and training metadata (`training.json`): all travel with it and come back on
pull. Identical bytes (the same config and weights) are one version per capability and
backbone: registering them again is a 409 `conflict` whose detail names the version.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.audit import append_event
from registry.db.convert import to_adapter
from registry.db.models import SqlAdapterTag, SqlAdapterVersion, SqlBackbone, SqlCapability
from registry.domain import AdapterState, AdapterVersion, Lineage, Page, Principal
from registry.errors import (
    ConflictError,
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
from registry.services.tags import check_tags, search_filters
from storage import BlobStore, InvalidSafetensorsError, Manifest, manifest_of_stream
from storage import DigestMismatchError as StorageDigestMismatch

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"
REQUIRED_FILES = (CONFIG_FILE, WEIGHTS_FILE)
CARD_FILE = "README.md"
TRAINING_FILE = "training.json"
ALLOWED_FILES = (*REQUIRED_FILES, CARD_FILE, TRAINING_FILE)
MAX_CARD_BYTES = 256 * 1024
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
    tags: dict[str, str] = field(default_factory=dict)


def _check_files(store: BlobStore, files: dict[str, str]) -> None:
    missing = [name for name in REQUIRED_FILES if name not in files]
    if missing:
        raise InvalidError(f"files must include {list(REQUIRED_FILES)}; missing {missing}")
    for name, digest in sorted(files.items()):
        if "/" in name or "\\" in name or name.startswith(".") or not name:
            raise InvalidError(f"invalid file name {name!r}: plain file names only")
        if name not in ALLOWED_FILES:
            raise InvalidError(f"unexpected file {name!r}: one of {list(ALLOWED_FILES)}")
        require_blob(store=store, digest=digest, what=name)


def content_digest(files: dict[str, str]) -> str:
    """The identity of an adapter's bytes: sha256 over its config's and weights' digests
    (the card and training metadata describe it; they do not make it another adapter)."""
    body = f"{files.get(CONFIG_FILE, '')}\n{files.get(WEIGHTS_FILE, '')}"
    return hashlib.sha256(body.encode()).hexdigest()


def _read_card(store: BlobStore, files: dict[str, str]) -> str | None:
    digest = files.get(CARD_FILE)
    if digest is None:
        return None
    if store.size(digest) > MAX_CARD_BYTES:
        raise InvalidError(f"{CARD_FILE} is larger than {MAX_CARD_BYTES} bytes")
    try:
        text = store.get(digest).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidError(f"{CARD_FILE} is not UTF-8 text: {exc}") from exc
    if "\x00" in text:
        raise InvalidError(f"{CARD_FILE} is not text (it holds NUL characters)")
    return text


def _check_new_content(
    session: Session, capability: SqlCapability, backbone: SqlBackbone, digest: str
) -> None:
    """`ConflictError` naming the version that already has these bytes, if one does."""
    twin = session.scalar(
        select(SqlAdapterVersion).where(
            SqlAdapterVersion.capability_id == capability.id,
            SqlAdapterVersion.backbone_id == backbone.id,
            SqlAdapterVersion.content_digest == digest,
        )
    )
    if twin is not None:
        name = f"{capability.name}@{twin.version}"
        raise ConflictError(
            {
                "message": f"identical bytes are already {name} (id {twin.id}); "
                "nothing was registered",
                "adapter_id": twin.id,
                "name": name,
            }
        )


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
    card = _read_card(store, draft.files)
    tags = check_tags(draft.tags)
    identity = content_digest(draft.files)

    def insert() -> SqlAdapterVersion:
        _check_new_content(session, capability, backbone, identity)  # again after a race
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
            card=card,
            content_digest=identity,
            tags=[SqlAdapterTag(key=k, value=v) for k, v in tags.items()],
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
            "tags": adapter.tags,
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
    tags: list[str] | None = None,
    label: str | None = None,
    parent_id: int | None = None,
    text: str | None = None,
) -> Page:
    """Adapters filtered by capability name, backbone root, state, `key=value` tags (all),
    label, parent and text in the model card; oldest first."""
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
    query = search_filters(query, tags=tags or (), label=label, parent_id=parent_id, text=text)
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
