"""A channel's library: {capability -> adapter} + hard order, and its canonical digest."""

from __future__ import annotations

import hashlib
from typing import Any

from registry.audit import canonical_json
from registry.db.models import SqlAdapterVersion


def library_entry(row: SqlAdapterVersion) -> dict[str, Any]:
    return {
        "adapter_id": row.id,
        "name": f"{row.capability.name}@{row.version}",
        "manifest_root": row.manifest_root,
        "files": dict(row.files),
    }


def library_digest(backbone: str, library: dict[str, dict[str, Any]], order: list[str]) -> str:
    """sha256 of ``{"backbone", "library": {capability: manifest_root}, "order"}``."""
    roots = {cap: entry["manifest_root"] for cap, entry in library.items()}
    body = canonical_json({"backbone": backbone, "library": roots, "order": order})
    return hashlib.sha256(body.encode("utf-8")).hexdigest()
