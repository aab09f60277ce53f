"""Adapter versions: register (with the fit checks), show (list and search:
`registry/services/adapter_list.py`).

A version's files are its PEFT pair (`adapter_config.json`, `adapter_model.safetensors`)
and, when the directory has them, its model card (`README.md`, also kept as text for search
and the web UI) and training metadata (`training.json`): all travel with it and come back on
pull. Identical bytes (the same config and weights) are one version per capability and
backbone: registering them again is a 409 `conflict` whose detail names the version.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.audit import append_event
from registry.db.convert import to_adapter
from registry.db.models import SqlAdapterTag, SqlAdapterVersion, SqlBackbone, SqlCapability
from registry.db.session import Database
from registry.domain import AdapterState, AdapterVersion, Principal
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
from registry.services.tags import check_tags
from registry.services.version_counts import moved as count_moved
from registry.settings import DEFAULT_ADAPTER_LIMITS, LIMIT_SETTINGS
from storage import (
    BlobStore,
    HeaderLimitError,
    HeaderLimits,
    InvalidSafetensorsError,
    Manifest,
    manifest_of_stream,
)
from storage import DigestMismatchError as StorageDigestMismatch

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"
REQUIRED_FILES = (CONFIG_FILE, WEIGHTS_FILE)
CARD_FILE = "README.md"
TRAINING_FILE = "training.json"
ALLOWED_FILES = (*REQUIRED_FILES, CARD_FILE, TRAINING_FILE)
MAX_CARD_BYTES = 256 * 1024


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


def _read_manifest(store: BlobStore, digest: str, limits: HeaderLimits) -> Manifest:
    try:
        with store.open(digest) as fh:
            return manifest_of_stream(fh, store.size(digest), label=WEIGHTS_FILE, limits=limits)
    except HeaderLimitError as exc:
        setting = LIMIT_SETTINGS.get(exc.limit, exc.limit)
        raise IncompatibleAdapterError(
            {
                "message": f"{WEIGHTS_FILE} refused: {exc.problem}; "
                f"the server's {setting} setting raises it",
                "problems": [exc.problem],
                "limit": exc.limit,
                "bound": exc.bound,
                "setting": setting,
            }
        ) from exc
    except InvalidSafetensorsError as exc:
        raise IncompatibleAdapterError(f"{WEIGHTS_FILE} is not valid safetensors: {exc}") from exc
    except StorageDigestMismatch as exc:
        raise DigestMismatchError(f"stored blob {digest} is corrupted: {exc}") from exc


def weights_manifest(*, store: BlobStore, adapter: AdapterVersion) -> Manifest:
    """The tensor manifest of a recorded version's weights (read from the store)."""
    return _read_manifest(store, adapter.files[WEIGHTS_FILE], DEFAULT_ADAPTER_LIMITS)


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


@dataclass(frozen=True)
class VerifiedAdapter:
    """A draft whose files were read and checked (``verify_adapter``): what is left to do
    is bookkeeping (``record_adapter``)."""

    draft: AdapterDraft
    capability_id: int
    backbone_id: int
    rank: int
    alpha: float
    target_modules: list[str]
    manifest_root: str
    card: str | None
    tags: dict[str, str]
    identity: str


def verify_adapter(
    *,
    database: Database,
    store: BlobStore,
    draft: AdapterDraft,
    limits: HeaderLimits = DEFAULT_ADAPTER_LIMITS,
) -> VerifiedAdapter:
    """Read and check an adapter's files against its backbone, outside any transaction.

    Only the names are looked up in a short read; reading and hashing the files (which a
    hostile header can make slow) holds no database lock and no connection.
    """
    with database.read() as session:
        capability = find_capability_row(session, draft.capability)
        backbone = find_backbone_row(session, draft.backbone)
        ids, manifest_digest = (capability.id, backbone.id), backbone.manifest_digest
    _check_files(store, draft.files)
    raw_config = read_config(store, draft.files[CONFIG_FILE])
    manifest = _read_manifest(store, draft.files[WEIGHTS_FILE], limits)
    backbone_weights = backbone_manifest(store=store, manifest_digest=manifest_digest)
    config = check_fit(raw_config, manifest, backbone_weights).config
    return VerifiedAdapter(
        draft=draft,
        capability_id=ids[0],
        backbone_id=ids[1],
        rank=config.r,
        alpha=config.alpha,
        target_modules=config.target_list,
        manifest_root=manifest.root,
        card=_read_card(store, draft.files),
        tags=check_tags(draft.tags),
        identity=content_digest(draft.files),
    )


def record_adapter(
    *, session: Session, store: BlobStore, actor: Principal, verified: VerifiedAdapter
) -> AdapterVersion:
    """Record a verified adapter as the next version: bookkeeping only.

    Its blobs are checked to still exist (a stat each) under the gc lock (shared), held
    until the row is committed.
    """
    guard_blobs(session)
    draft = verified.draft
    capability = session.get(SqlCapability, verified.capability_id)
    backbone = session.get(SqlBackbone, verified.backbone_id)
    if capability is None or backbone is None:  # pragma: no cover - never deleted
        raise NotFoundError("the capability or backbone is gone")
    _check_files(store, draft.files)
    _check_parent(session, draft.parent_id, capability, backbone)

    def insert() -> SqlAdapterVersion:
        _check_new_content(session, capability, backbone, verified.identity)
        row = SqlAdapterVersion(
            capability=capability,
            backbone=backbone,
            version=_next_version(session, capability.id, backbone.id),
            label=draft.label,
            parent_id=draft.parent_id,
            state=AdapterState.CANDIDATE.value,
            rank=verified.rank,
            alpha=verified.alpha,
            target_modules=verified.target_modules,
            files=dict(sorted(draft.files.items())),
            manifest_root=verified.manifest_root,
            provenance=draft.provenance or {},
            created_by=actor.name,
            created_by_id=actor.principal_id,
            card=verified.card,
            content_digest=verified.identity,
            tags=[SqlAdapterTag(key=k, value=v) for k, v in verified.tags.items()],
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
    count_moved(session, row.capability_id, None, row.state)  # the chain is locked
    return adapter


def register_adapter(
    *,
    database: Database,
    store: BlobStore,
    actor: Principal,
    draft: AdapterDraft,
    limits: HeaderLimits = DEFAULT_ADAPTER_LIMITS,
) -> AdapterVersion:
    """Check an adapter's files (no transaction open), then record it (one short write)."""
    verified = verify_adapter(database=database, store=store, draft=draft, limits=limits)
    with database.write() as session:
        return record_adapter(session=session, store=store, actor=actor, verified=verified)


def backbone_of_adapters(session: Session, ids: Iterable[int | None]) -> SqlBackbone | None:
    """The one backbone of these adapter versions (ids; None skipped), None for none; 404 for
    an unknown id, 422 ``incompatible_adapter`` when they are on several backbones."""
    rows = [find_adapter_row(session, i) for i in ids if i is not None]
    backbones = {row.backbone_id: row.backbone for row in rows}
    if len(backbones) > 1:
        raise IncompatibleAdapterError(f"the adapters are on {len(backbones)} backbones")
    return next(iter(backbones.values()), None)


def find_adapter_row(session: Session, adapter_id: int) -> SqlAdapterVersion:
    row = session.get(SqlAdapterVersion, adapter_id)
    if row is None:
        raise NotFoundError(f"adapter {adapter_id} not found")
    return row


def get_adapter(*, session: Session, adapter_id: int) -> AdapterVersion:
    return to_adapter(find_adapter_row(session, adapter_id))
