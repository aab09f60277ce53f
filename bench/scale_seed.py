"""Seeding a large registry for bench/bench_scale.py, with the rows the product writes.

`seed(db, store, tmp, versions, chain)`: one backbone, 50 capabilities and a token through
the service layer; `SERVICE` versions registered through `adapters.register_adapter` (the
real path, audit events included); the rest recorded in bulk through the ORM models with
the fields `record_adapter` would give them (checked by `verify_adapter`, the same service
function) and their audit events hash-chained as `append_event` chains them. On top, a
lineage chain of `chain` versions (each the parent of the next) in a capability of its own.

The registry refuses identical bytes twice in one capability, so each capability needs its
own file set per version; the same sets are reused across capabilities (allowed: identity
is per capability and backbone), so only `max(versions / 50, chain)` sets are written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import insert, select, text
from synthetic import adapter_files, backbone_manifest_json, write_adapter, write_backbone

from registry.audit import GENESIS, canonical_json, event_hash
from registry.db.models import (
    SqlAdapterTag,
    SqlAdapterVersion,
    SqlCapability,
    SqlEvent,
    utcnow,
)
from registry.db.session import Database
from registry.domain import Principal, Role
from registry.services import (
    adapters,
    backbones,
    capabilities,
    channels,
    lifecycle,
    tokens,
    version_counts,
)
from storage import BlobStore

CAPABILITIES = 50
CHAIN_CAPABILITY = "lineage"
SERVICE = 100  # versions registered through the service layer, one by one
BATCH = 2000
TEAMS = 12
NEEDLE_EVERY = 97  # every 97th card mentions "needle" (the text search's target)
STATES = ("approved", "candidate", "candidate", "rejected")
ADMIN = Principal("root", Role.ADMIN)
ALICE = Principal("alice", Role.PUBLISHER)


@dataclass(frozen=True)
class Seeded:
    root: str  # the backbone
    secret: str  # an admin token
    capabilities: list[str]
    chain_tip: int  # the adapter id at the end of the lineage chain
    some_id: int  # a version in the middle of the table
    spare: list[dict[str, str]]  # unregistered file sets of capabilities[0]
    channel_pick: dict[str, list[int]]  # approved versions per capability, for promotions


def _card(cap: str, i: int) -> str:
    extra = " It found the needle." if i % NEEDLE_EVERY == 0 else ""
    return f"# {cap} adapter {i}\n\nTrained for the {cap} phase on synthetic data.{extra}\n"


def _tags(i: int) -> dict[str, str]:
    return {"team": f"t{i % TEAMS}", "run": f"r{i}"}


def _file_sets(store: BlobStore, tmp: Path, count: int) -> list[dict[str, str]]:
    sets = []
    for seed in range(count):
        data = adapter_files(write_adapter(tmp / f"a{seed}", seed=seed))
        sets.append({name: store.put([blob]) for name, blob in data.items()})
    return sets


def _verified(
    db: Database, store: BlobStore, root: str, sets: list[dict[str, str]]
) -> list[adapters.VerifiedAdapter]:
    """Each file set checked by the service layer (what `record_adapter` records)."""
    return [
        adapters.verify_adapter(
            database=db, store=store, draft=adapters.AdapterDraft("c0", root, files)
        )
        for files in sets
    ]


class _Bulk:
    """Versions recorded through the ORM models in batches, with their hash-chained events."""

    def __init__(self, db: Database, root: str) -> None:
        self.db, self.root = db, root
        self.rows: list[dict[str, object]] = []
        self.names: list[str] = []
        self.tags: list[dict[str, object]] = []
        with db.read() as session:
            self.next_id = (session.scalar(text("SELECT max(id) FROM adapter_versions")) or 0) + 1
            self.prev = session.scalar(select(SqlEvent.hash).order_by(SqlEvent.id.desc()).limit(1))

    def add(
        self,
        verified: adapters.VerifiedAdapter,
        capability_id: int,
        version: int,
        state: str,
        i: int,
        cap: str,
        parent_id: int | None = None,
    ) -> int:
        row_id = self.next_id
        self.next_id += 1
        files = dict(sorted(verified.draft.files.items()))
        now = utcnow()
        self.rows.append(
            {
                "id": row_id,
                "capability_id": capability_id,
                "backbone_id": verified.backbone_id,
                "version": version,
                "label": None,
                "parent_id": parent_id,
                "state": state,
                "rank": verified.rank,
                "alpha": verified.alpha,
                "target_modules": verified.target_modules,
                "files": files,
                "manifest_root": verified.manifest_root,
                "provenance": {},
                "created_by": ALICE.name,
                "created_by_id": None,
                "created_at": now,
                "decided_by": None if state == "candidate" else ADMIN.name,
                "decided_at": None if state == "candidate" else now,
                "card": _card(cap, i),
                "content_digest": verified.identity,
            }
        )
        self.names.append(f"{cap}@{version}")
        self.tags += [{"adapter_id": row_id, "key": k, "value": v} for k, v in _tags(i).items()]
        if len(self.rows) >= BATCH:
            self.flush()
        return row_id

    def _tags_by_row(self) -> list[dict[str, object]]:
        by_id: dict[object, dict[str, object]] = {row["id"]: {} for row in self.rows}
        for tag in self.tags:
            by_id[tag["adapter_id"]][str(tag["key"])] = tag["value"]
        return [dict(sorted(by_id[row["id"]].items())) for row in self.rows]

    def _events(self) -> list[dict[str, object]]:
        events = []
        for name, row, tags in zip(self.names, self.rows, self._tags_by_row(), strict=True):
            payload = canonical_json(
                {
                    "name": name,
                    "backbone": self.root,
                    "manifest_root": row["manifest_root"],
                    "files": row["files"],
                    "parent_id": row["parent_id"],
                    "tags": tags,
                }
            )
            prev = self.prev or GENESIS
            fields = {
                "actor": ALICE.name,
                "action": "adapter.register",
                "subject": f"adapter:{row['id']}",
                "payload": payload,
                "created_at": row["created_at"],
            }
            self.prev = event_hash(prev_hash=prev, **fields)  # type: ignore[arg-type]
            events.append({**fields, "prev_hash": prev, "hash": self.prev})
        return events

    def flush(self) -> None:
        if not self.rows:
            return
        with self.db.write() as session:
            session.execute(insert(SqlAdapterVersion), self.rows)
            session.execute(insert(SqlAdapterTag), self.tags)
            session.execute(insert(SqlEvent), self._events())  # ids in list order
            if session.get_bind().dialect.name == "postgresql":  # ids were given: catch up
                session.execute(
                    text(
                        "SELECT setval(pg_get_serial_sequence('adapter_versions', 'id'), "
                        "(SELECT max(id) FROM adapter_versions))"
                    )
                )
        self.rows, self.tags, self.names = [], [], []


def _analyze(db: Database) -> None:
    """Planner statistics and (PostgreSQL) the visibility map, as autovacuum would have them
    for a registry that grew over months: a bulk load leaves neither."""
    engine = db.engine
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")
    else:
        with engine.begin() as conn:
            conn.exec_driver_sql("ANALYZE")


def seed(
    db: Database,
    store: BlobStore,
    tmp: Path,
    versions: int,
    chain: int,
    *,
    service: int = SERVICE,
    spare: int = 50,
) -> Seeded:
    """`versions` versions (the first `service` through the service layer) plus a chain of
    `chain`; `spare` file sets of the first capability left unregistered."""
    names = [f"c{i}" for i in range(CAPABILITIES - 1)] + [CHAIN_CAPABILITY]
    per_cap = math.ceil(versions / (CAPABILITIES - 1))
    sets = _file_sets(store, tmp, max(per_cap + spare, chain))
    manifest = backbone_manifest_json(write_backbone(tmp / "bb"))
    with db.write() as session:
        root = backbones.register_backbone(
            session=session, store=store, actor=ADMIN, name="bb", manifest=manifest
        ).root
        for name in names:
            capabilities.create_capability(
                session=session, actor=ADMIN, name=name, description="", order=None
            )
        _, secret = tokens.create_token(session=session, name="bench", role=Role.ADMIN)
    picks: dict[str, list[int]] = {name: [] for name in names}
    for i in range(min(service, versions)):  # the real path, one by one
        cap = names[i % (CAPABILITIES - 1)]
        draft = adapters.AdapterDraft(
            cap, root, sets[i // (CAPABILITIES - 1)], tags=_tags(i), provenance={}
        )
        picks[cap].append(
            adapters.register_adapter(database=db, store=store, actor=ALICE, draft=draft).id
        )
    with db.write() as session:
        for ids in picks.values():
            for adapter_id in ids:
                lifecycle.approve_adapter(session=session, actor=ADMIN, adapter_id=adapter_id)
        cap_ids = {n: i for n, i in session.execute(select(SqlCapability.name, SqlCapability.id))}
    verified = _verified(db, store, root, sets)
    bulk = _Bulk(db, root)
    for i in range(min(service, versions), versions):
        cap_index = i % (CAPABILITIES - 1)
        cap, number = names[cap_index], i // (CAPABILITIES - 1)
        state = STATES[i % len(STATES)]
        row_id = bulk.add(verified[number], cap_ids[cap], number + 1, state, i, cap)
        if state == "approved" and len(picks[cap]) < 4:
            picks[cap].append(row_id)
    parent = None
    for depth in range(chain):
        parent = bulk.add(
            verified[depth], cap_ids[CHAIN_CAPABILITY], depth + 1, "approved", depth,
            CHAIN_CAPABILITY, parent_id=parent,
        )  # fmt: skip
    bulk.flush()
    library = {cap: ids[0] for cap, ids in picks.items() if ids}
    with db.write() as session:
        version_counts.refill(session=session)  # the bulk rows bypassed the services' counting
        request = channels.PromoteRequest("prod", root, library, sorted(library), create=True)
        channels.promote(session=session, actor=ADMIN, request=request)
    _analyze(db)
    return Seeded(
        root=root,
        secret=secret,
        capabilities=names,
        chain_tip=parent or 1,
        some_id=max(1, versions // 2),
        spare=sets[per_cap:],
        channel_pick=picks,
    )
