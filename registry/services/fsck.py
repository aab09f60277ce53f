"""Consistency check of the whole registry: database rows against blobs, and the chain.

- every referenced blob exists, hashes to its digest and has the size the store reports;
- every adapter's weights blob parses to its recorded manifest root, every backbone's
  manifest blob to its root;
- every channel's revisions are numbered 1..N, and its head serves only approved adapters
  whose roots and files are the ones recorded, with a library digest that recomputes;
- the event chain verifies;
- the kept version counts (capability x state) are the versions' own.

Each problem is one ``Finding``; a clean registry has none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.audit import verify_events
from registry.db.models import (
    SqlAdapterVersion,
    SqlBackbone,
    SqlCapability,
    SqlChannel,
    SqlRevision,
)
from registry.domain import AdapterState
from registry.services import version_counts
from registry.services.library import library_digest
from storage import (
    BlobNotFoundError,
    BlobStore,
    DigestMismatchError,
    Manifest,
    StorageError,
    manifest_of_stream,
)

WEIGHTS_FILE = "adapter_model.safetensors"
STREAM = 1000  # adapter rows fetched at a time
MAX_USERS = 5  # the users of a broken blob a finding names


@dataclass(frozen=True)
class Finding:
    check: str  # blob, adapter, backbone, channel, counts, events
    subject: str
    detail: str


@dataclass(frozen=True)
class FsckReport:
    findings: list[Finding] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.findings


def _check_blob(store: BlobStore, digest: str) -> str | None:
    """None when the blob is there, whole and verified; else what is wrong."""
    try:
        size = store.size(digest)
        read = store.verify(digest)  # hashed straight from the read buffers, nothing kept
    except BlobNotFoundError:
        return "missing from the store"
    except DigestMismatchError as exc:
        return f"corrupted: its bytes hash to {exc.actual}"
    except (StorageError, OSError) as exc:
        return f"unreadable: {exc}"
    if read != size:
        return f"the store reports {size} bytes, {read} were read"
    return None


class _Blobs:
    """Each referenced blob checked once, however many rows use it: what was found is kept
    per distinct digest (a problem, or the weights root), never per row."""

    def __init__(self, store: BlobStore) -> None:
        self.store = store
        self.problems: dict[str, str | None] = {}
        self.users: dict[str, list[str]] = {}  # the first few users of a broken blob
        self.roots: dict[str, str | None] = {}

    def check(self, digest: str, user: str) -> None:
        if digest not in self.problems:
            self.problems[digest] = _check_blob(self.store, digest)
        if self.problems[digest] is not None:
            users = self.users.setdefault(digest, [])
            if len(users) < MAX_USERS:
                users.append(user)

    def weights_root(self, digest: str) -> str | None:
        if digest not in self.roots:
            self.roots[digest] = _weights_root(self.store, digest)
        return self.roots[digest]

    def findings(self) -> list[Finding]:
        return [
            Finding("blob", digest, f"{problem} (used by {', '.join(self.users[digest])})")
            for digest, problem in sorted(self.problems.items())
            if problem is not None
        ]


def _weights_root(store: BlobStore, digest: str) -> str | None:
    try:
        with store.open(digest) as fh:
            return manifest_of_stream(fh, store.size(digest), label=WEIGHTS_FILE).root
    except (StorageError, OSError):
        return None  # reported by the blob check


def _adapter_findings(session: Session, blobs: _Blobs) -> tuple[list[Finding], int]:
    """Every adapter version's blobs and weights root, streamed in id order (only the
    columns needed, `STREAM` rows at a time)."""
    rows = session.execute(
        select(
            SqlAdapterVersion.version,
            SqlAdapterVersion.files,
            SqlAdapterVersion.manifest_root,
            SqlCapability.name,
        )
        .join(SqlCapability, SqlCapability.id == SqlAdapterVersion.capability_id)
        .order_by(SqlAdapterVersion.id)
        .execution_options(yield_per=STREAM)
    )
    findings, count = [], 0
    for version, files, manifest_root, capability in rows:
        count += 1
        name = f"{capability}@{version}"
        for digest in files.values():
            blobs.check(str(digest), name)
        digest = files.get(WEIGHTS_FILE)
        if digest is None:
            findings.append(Finding("adapter", name, f"no {WEIGHTS_FILE} among its files"))
            continue
        root = blobs.weights_root(digest)
        if root is not None and root != manifest_root:
            findings.append(
                Finding("adapter", name, f"weights hash to root {root}, not {manifest_root}")
            )
    return findings, count


def _backbone_findings(store: BlobStore, rows: list[SqlBackbone]) -> list[Finding]:
    findings = []
    for row in rows:
        try:
            manifest = Manifest.from_json(json.loads(store.get(row.manifest_digest)))
        except (StorageError, OSError, ValueError):
            continue  # reported by the blob check
        if manifest.root != row.root:
            findings.append(
                Finding("backbone", row.name, f"manifest blob has root {manifest.root}")
            )
    return findings


def _entry_problem(entry: dict[str, object], row: SqlAdapterVersion | None) -> str | None:
    if row is None:
        return "is not a registered adapter"
    if row.state != AdapterState.APPROVED.value:
        return f"is {row.state}, not approved"
    if entry.get("manifest_root") != row.manifest_root or entry.get("files") != row.files:
        return "does not match the adapter's recorded root and files"
    return None


def _channel_findings(session: Session, channel: SqlChannel) -> list[Finding]:
    numbers = list(
        session.scalars(
            select(SqlRevision.revision)
            .where(SqlRevision.channel_id == channel.id)
            .order_by(SqlRevision.revision)
        )
    )
    findings = []
    if numbers != list(range(1, len(numbers) + 1)):
        findings.append(Finding("channel", channel.name, f"revisions are not 1..N: {numbers}"))
    if not numbers:
        return findings
    head = session.scalars(
        select(SqlRevision).where(
            SqlRevision.channel_id == channel.id, SqlRevision.revision == numbers[-1]
        )
    ).one()
    for cap, entry in sorted(head.library.items()):
        problem = _entry_problem(entry, session.get(SqlAdapterVersion, entry.get("adapter_id")))
        if problem is not None:
            findings.append(
                Finding("channel", channel.name, f"head {head.revision}: {cap} {problem}")
            )
    digest = library_digest(channel.backbone.root, head.library, list(head.order))
    if digest != head.library_digest:
        findings.append(
            Finding("channel", channel.name, f"head {head.revision}: library digest differs")
        )
    return findings


def _count_findings(session: Session) -> list[Finding]:
    kept, actual = version_counts.kept(session=session), version_counts.recount(session=session)
    names = {i: n for i, n in session.execute(select(SqlCapability.id, SqlCapability.name))}
    return [
        Finding(
            "counts",
            f"{names.get(capability, capability)} {state}",
            f"counted {kept.get((capability, state), 0)}, "
            f"the versions say {actual.get((capability, state), 0)}",
        )
        for capability, state in sorted(kept.keys() | actual.keys())
        if kept.get((capability, state), 0) != actual.get((capability, state), 0)
    ]


def fsck(*, session: Session, store: BlobStore) -> FsckReport:
    """Check everything; reads every distinct referenced blob once (adapter weights twice).

    Adapter versions are streamed: memory grows with the number of distinct blobs (a digest
    and a result each), not with the rows that use them.
    """
    blobs = _Blobs(store)
    findings, adapters = _adapter_findings(session, blobs)
    backbones = list(session.scalars(select(SqlBackbone).order_by(SqlBackbone.id)))
    channels = list(session.scalars(select(SqlChannel).order_by(SqlChannel.id)))
    for backbone in backbones:
        blobs.check(backbone.manifest_digest, f"backbone {backbone.name}")
    findings = blobs.findings() + findings
    findings += _backbone_findings(store, backbones)
    for channel in channels:
        findings += _channel_findings(session, channel)
    findings += _count_findings(session)
    chain = verify_events(session)
    if not chain.ok:
        findings.append(Finding("events", f"event {chain.first_broken}", chain.detail))
    checked = {
        "blobs": len(blobs.problems),
        "adapters": adapters,
        "backbones": len(backbones),
        "channels": len(channels),
        "events": chain.count,
    }
    return FsckReport(findings=findings, checked=checked)
