"""Backbones, registered by their manifest (stored as a canonical JSON blob)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.audit import append_event, canonical_json
from registry.db.convert import to_backbone
from registry.db.models import SqlBackbone
from registry.domain import Backbone, Principal
from registry.errors import ConflictError, InvalidError, NotFoundError
from registry.services.gc import guard_blobs
from registry.services.retry import insert_unique
from storage import BlobStore, Manifest, ManifestError, StorageError

_MANIFEST_CACHE: dict[str, Manifest] = {}
_CACHE_SIZE = 64
MAX_PARAMS = 2**63 - 1  # what a BIGINT holds


def parse_manifest(obj: Any) -> Manifest:
    try:
        return Manifest.from_json(obj)
    except (ManifestError, StorageError, ValueError, TypeError) as exc:
        raise InvalidError(f"invalid manifest: {exc}") from exc


@dataclass(frozen=True)
class PreparedBackbone:
    """A parsed manifest whose canonical JSON is already in the store (``prepare_backbone``)."""

    name: str
    manifest: Manifest
    digest: str


def prepare_backbone(*, store: BlobStore, name: str, manifest: Any) -> PreparedBackbone:
    """Parse and store a backbone's manifest, outside any transaction."""
    if not name.strip() or len(name) > 256:
        raise InvalidError("backbone name must be 1-256 characters")
    parsed = parse_manifest(manifest)
    if len(parsed) == 0:
        raise InvalidError("a backbone manifest needs at least one tensor")
    if parsed.param_count > MAX_PARAMS:
        raise InvalidError(f"a backbone manifest of over {MAX_PARAMS} parameters")
    digest = store.put([canonical_json(parsed.to_json()).encode("utf-8")])
    return PreparedBackbone(name=name, manifest=parsed, digest=digest)


def record_backbone(
    *, session: Session, store: BlobStore, actor: Principal, prepared: PreparedBackbone
) -> Backbone:
    """Record a prepared backbone: bookkeeping, plus storing the (small) manifest blob again
    should ``weact gc`` have collected it since it was prepared."""
    parsed, digest = prepared.manifest, prepared.digest
    conflict = f"backbone with root {parsed.root} is already registered"
    if session.scalar(select(SqlBackbone.id).where(SqlBackbone.root == parsed.root)):
        raise ConflictError(conflict)
    guard_blobs(session)  # the manifest blob cannot be collected before the row commits
    if not store.exists(digest):
        store.put([canonical_json(parsed.to_json()).encode("utf-8")])
    row = SqlBackbone(
        name=prepared.name,
        root=parsed.root,
        tensor_count=len(parsed),
        param_count=parsed.param_count,
        manifest_digest=digest,
        created_by=actor.name,
    )
    insert_unique(session, row, conflict)
    append_event(
        session,
        actor=actor.name,
        action="backbone.register",
        subject=f"backbone:{parsed.root}",
        payload={"name": prepared.name, "root": parsed.root, "manifest_digest": digest},
    )
    return to_backbone(row)


def register_backbone(
    *, session: Session, store: BlobStore, actor: Principal, name: str, manifest: Any
) -> Backbone:
    """Prepare and record a backbone in ``session`` (scripts; the API prepares first)."""
    prepared = prepare_backbone(store=store, name=name, manifest=manifest)
    return record_backbone(session=session, store=store, actor=actor, prepared=prepared)


def find_backbone_row(session: Session, key: str) -> SqlBackbone:
    """A backbone by root or numeric id; ``NotFoundError`` otherwise."""
    row = session.scalar(select(SqlBackbone).where(SqlBackbone.root == key))
    if row is None and key.isascii() and key.isdigit() and len(key) < 10:
        row = session.get(SqlBackbone, int(key))
    if row is None:
        raise NotFoundError(f"backbone {key!r} not found")
    return row


def get_backbone(*, session: Session, key: str) -> Backbone:
    return to_backbone(find_backbone_row(session, key))


def list_backbones(*, session: Session) -> list[Backbone]:
    return [to_backbone(r) for r in session.scalars(select(SqlBackbone).order_by(SqlBackbone.id))]


def backbone_manifest(*, store: BlobStore, manifest_digest: str) -> Manifest:
    """The stored manifest of a backbone (content-addressed, so cached safely)."""
    cached = _MANIFEST_CACHE.get(manifest_digest)
    if cached is not None:
        return cached
    manifest = Manifest.from_json(json.loads(store.get(manifest_digest)))
    if len(_MANIFEST_CACHE) >= _CACHE_SIZE:
        _MANIFEST_CACHE.pop(next(iter(_MANIFEST_CACHE)))
    _MANIFEST_CACHE[manifest_digest] = manifest
    return manifest
