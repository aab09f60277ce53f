"""Frozen domain objects handed out by the services (ORM rows never leave registry/db/)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class Role(StrEnum):
    READER = "reader"
    PUBLISHER = "publisher"
    APPROVER = "approver"
    NODE = "node"
    ADMIN = "admin"


class AdapterState(StrEnum):
    CANDIDATE = "candidate"
    APPROVED = "approved"
    REJECTED = "rejected"
    REVOKED = "revoked"


@dataclass(frozen=True)
class Principal:
    """Who is calling: an identity (``principal_id``) acting through one token.

    ``name`` is for display and the audit log; rules about *who* (self-approval) compare
    ``principal_id``. A node token carries the node id it is bound to (None until its first
    heartbeat). In-process callers (tests, benchmarks) may leave the ids None.
    """

    name: str
    role: Role
    token_id: int | None = None
    principal_id: int | None = None
    node_id: str | None = None


@dataclass(frozen=True)
class TokenInfo:
    id: int
    name: str
    role: Role
    created_at: datetime
    principal_id: int | None = None
    node_id: str | None = None


@dataclass(frozen=True)
class Blob:
    digest: str
    size: int
    created: bool = False


@dataclass(frozen=True)
class Backbone:
    id: int
    name: str
    root: str
    tensor_count: int
    param_count: int
    manifest_digest: str
    created_at: datetime


@dataclass(frozen=True)
class Capability:
    name: str
    description: str
    order: int | None


@dataclass(frozen=True)
class AdapterVersion:
    id: int
    name: str
    capability: str
    backbone: str
    version: int
    label: str | None
    parent_id: int | None
    state: AdapterState
    rank: int
    alpha: float
    target_modules: list[str]
    files: dict[str, str]
    manifest_root: str
    provenance: dict[str, Any]
    created_by: str
    created_at: datetime


@dataclass(frozen=True)
class Page:
    items: list[AdapterVersion]
    total: int


@dataclass(frozen=True)
class Lineage:
    ancestors: list[AdapterVersion]
    adapter: AdapterVersion
    descendants: list[AdapterVersion]


@dataclass(frozen=True)
class LibraryEntry:
    adapter_id: int
    name: str
    manifest_root: str
    files: dict[str, str]


@dataclass(frozen=True)
class Revision:
    channel: str
    backbone: str
    revision: int
    library: dict[str, LibraryEntry]
    order: list[str]
    library_digest: str
    created_by: str
    created_at: datetime
    reason: str | None


@dataclass(frozen=True)
class Benchmark:
    name: str
    version: int
    dataset_digest: str
    scope: str
    metric: str
    direction: str
    tolerance: float


@dataclass(frozen=True)
class Evaluation:
    id: int
    benchmark: str
    benchmark_version: int
    library_digest: str | None
    adapter_id: int | None
    score: float
    n: int
    items_digest: str | None
    created_by: str
    created_at: datetime


@dataclass(frozen=True)
class GateCheck:
    benchmark: str
    version: int
    scope: str
    baseline: float | None
    candidate: float | None
    delta: float | None
    tolerance: float
    verdict: str


@dataclass(frozen=True)
class GateReport:
    passed: bool
    checks: list[GateCheck] = field(default_factory=list)


@dataclass(frozen=True)
class PromoteResult:
    revision: Revision
    gate: GateReport


@dataclass(frozen=True)
class Node:
    id: str
    channel: str
    revision: int | None
    audit: dict[str, Any]
    audit_ok: bool
    last_heartbeat: datetime


@dataclass(frozen=True)
class Event:
    id: int
    actor: str
    action: str
    subject: str
    payload: dict[str, Any]
    created_at: datetime
    prev_hash: str
    hash: str


@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    count: int
    first_broken: int | None
    detail: str


@dataclass(frozen=True)
class RegistryStats:
    adapters_by_state: dict[str, int]
    channel_revisions: dict[str, int]
    nodes_by_audit: dict[str, int]
    events: int
