"""Garbage collection: blobs nothing references, and temp files that crashes left behind.

A blob is deleted only when all of these hold:
- no adapter version, backbone or evaluation references it (committed state);
- it was written more than ``grace`` ago (the store's modification time), and
- it was not PUT again within ``grace`` (``blob_leases``, renewed by every PUT, also by a
  PUT of a blob that already existed).

The window between a blob's PUT and the registration that references it is what the grace
period guards: a publisher uploads, then registers; keep ``grace`` well above the longest
such gap (the default, 24 h, is generous). Correctness does not rest on the clock alone:
the final check and the deletions run under an exclusive gc lock (PostgreSQL: an advisory
lock; SQLite: the single write transaction), and every transaction that makes a blob
referenced (adapter and backbone registration) or renews a lease holds the same lock
shared (``guard_blobs``) while it checks that its blobs exist. So a registration either
commits before gc looks (its blobs are referenced, kept) or starts after gc finished (a
deleted blob is "not found; upload it first", never a reference to nothing).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import delete, select, text
from sqlalchemy.orm import Session

from registry.db.models import SqlAdapterVersion, SqlBackbone, SqlBlobLease, SqlEvaluation
from registry.db.session import Database
from storage import BlobNotFoundError, BlobStore
from storage.inventory import InventoriedStore, StoredBlob

GC_LOCK_KEY = 0x57454147  # "WEAG"
BATCH = 200


@dataclass(frozen=True)
class GcReport:
    dry_run: bool
    grace_s: float
    blobs: list[str] = field(default_factory=list)  # deleted (or, dry run, to delete)
    blob_bytes: int = 0
    temp: list[str] = field(default_factory=list)
    temp_bytes: int = 0
    kept_referenced: int = 0
    kept_recent: int = 0


def guard_blobs(session: Session) -> None:
    """Hold the gc lock shared until this transaction ends (PostgreSQL; SQLite's write
    transactions exclude each other already)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock_shared(:key)"), {"key": GC_LOCK_KEY})


def _lock_exclusive(session: Session) -> None:
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": GC_LOCK_KEY})


def referenced_digests(session: Session) -> set[str]:
    """Every blob digest the registry's rows point at."""
    references = _References()
    references.refresh(session)
    return references.adapters | references.others


@dataclass
class _References:
    """The digests the rows point at, read whole once, then topped up.

    Adapter versions are never deleted and their files never change, and one registered
    later has a larger id: its transaction holds the gc lock shared (``guard_blobs``) from
    before its id is drawn until it commits, and ``refresh`` runs under the exclusive lock
    (SQLite: in the one write transaction). So each refresh reads only the versions above
    the highest id it has seen; backbones and evaluations (few) are read whole each time.
    """

    adapters: set[str] = field(default_factory=set)
    others: set[str] = field(default_factory=set)
    last_id: int = 0

    def __contains__(self, digest: str) -> bool:
        return digest in self.adapters or digest in self.others

    def refresh(self, session: Session) -> _References:
        rows = session.execute(
            select(SqlAdapterVersion.id, SqlAdapterVersion.files)
            .where(SqlAdapterVersion.id > self.last_id)
            .execution_options(yield_per=1000)
        )
        for adapter_id, files in rows:
            self.adapters.update(str(d) for d in files.values())
            self.last_id = max(self.last_id, adapter_id)
        self.others = set(session.scalars(select(SqlBackbone.manifest_digest)))
        items = session.scalars(
            select(SqlEvaluation.items_digest).where(SqlEvaluation.items_digest.is_not(None))
        )
        self.others.update(str(d) for d in items)
        return self


def _leased_since(session: Session, digests: list[str], cutoff: datetime) -> set[str]:
    rows = session.scalars(
        select(SqlBlobLease.digest).where(
            SqlBlobLease.digest.in_(digests), SqlBlobLease.put_at >= cutoff
        )
    )
    return set(rows)


def _inventory(store: BlobStore) -> InventoriedStore:
    if not isinstance(store, InventoriedStore):
        raise TypeError(f"the store {store.url} cannot list its blobs")
    return store


def _sweep_batch(
    database: Database,
    store: BlobStore,
    batch: list[StoredBlob],
    cutoff: float,
    dry_run: bool,
    references: _References,
) -> tuple[list[StoredBlob], int, int]:
    """Delete the unreferenced, unleased blobs of ``batch`` under the exclusive gc lock."""
    lease_cutoff = datetime.fromtimestamp(cutoff, UTC)
    with database.write() as session:
        _lock_exclusive(session)
        referenced = references.refresh(session)
        digests = [b.digest for b in batch]
        leased = _leased_since(session, digests, lease_cutoff)
        doomed = [b for b in batch if b.digest not in referenced and b.digest not in leased]
        if not dry_run:
            for blob in doomed:
                try:
                    store.delete(blob.digest)
                except BlobNotFoundError:
                    pass
            gone = [b.digest for b in doomed]
            session.execute(delete(SqlBlobLease).where(SqlBlobLease.digest.in_(gone)))
        kept_referenced = sum(1 for d in digests if d in referenced)
        return doomed, kept_referenced, sum(1 for d in leased if d not in referenced)


def collect_garbage(
    *, database: Database, store: BlobStore, grace_s: float, dry_run: bool = False
) -> GcReport:
    """Delete (or, dry run, list) unreferenced blobs and temp files older than ``grace_s``."""
    if grace_s < 0:
        raise ValueError("the grace period cannot be negative")
    inventory = _inventory(store)
    cutoff = time.time() - grace_s
    stored = list(inventory.iter_blobs())
    old = [b for b in stored if b.modified < cutoff]
    recent = len(stored) - len(old)
    doomed: list[StoredBlob] = []
    referenced = 0
    references = _References()
    for start in range(0, len(old), BATCH):
        gone, kept, leased = _sweep_batch(
            database, store, old[start : start + BATCH], cutoff, dry_run, references
        )
        doomed += gone
        referenced += kept
        recent += leased
    temp = [t for t in inventory.iter_temp() if t.modified < cutoff]
    if not dry_run:
        for entry in temp:
            inventory.remove_temp(entry.name)
    return GcReport(
        dry_run=dry_run,
        grace_s=grace_s,
        blobs=[b.digest for b in doomed],
        blob_bytes=sum(b.size for b in doomed),
        temp=[t.name for t in temp],
        temp_bytes=sum(t.size for t in temp),
        kept_referenced=referenced,
        kept_recent=recent,
    )
