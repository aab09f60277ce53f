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
    EVALUATOR = "evaluator"
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
    card: str | None = None  # the model card (README.md) as text
    tags: dict[str, str] = field(default_factory=dict)
    parent_name: str | None = None  # `write@3`: the parent as people name it
    decided_by: str | None = None  # who approved, rejected or revoked it
    decided_at: datetime | None = None
    reason: str | None = None  # the reason given with that decision
    approved_by: str | None = None  # who approved it (kept after a revoke), on single reads


@dataclass(frozen=True)
class Page:
    items: list[AdapterVersion]
    total: int  # the matches, counted up to a cap (`list_adapters`)
    total_exact: bool = True  # False: there are more than `total`


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
    # what the hard order names that the library has no adapter for: an order that cannot run
    order_missing: list[str] = field(default_factory=list)
    required_benchmarks: list[str] = field(default_factory=list)  # the channel's, for its gate


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
    provenance: dict[str, Any] = field(default_factory=dict)
    items: dict[str, float] | None = None  # per-item scores (only when asked for)


@dataclass(frozen=True)
class Scored:
    """One side of a gate check: an evaluation the gate trusts."""

    evaluation_id: int
    score: float
    items: dict[str, float] | None
    evaluated_by: str


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
    test: str | None = None  # "paired_bootstrap", or "point" when an evaluation has no items
    n: int | None = None  # items paired
    ci_low: float | None = None  # interval of the mean difference (paired test)
    ci_high: float | None = None
    baseline_evaluation: int | None = None
    candidate_evaluation: int | None = None
    baseline_by: str | None = None  # who evaluated
    candidate_by: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class GateReport:
    passed: bool
    checks: list[GateCheck] = field(default_factory=list)
    library_digest: str | None = None  # the candidate library (what evaluations are keyed by)
    baseline_library_digest: str | None = None
    seed: str | None = None
    resamples: int | None = None
    confidence: float | None = None


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
    library_digest: str | None = None
    stale: bool = False  # as the node reported it
    lag: int | None = None  # as the node reported it
    heartbeat_s: float | None = None  # the interval between its heartbeats, as it stated


@dataclass(frozen=True)
class NodeStatus:
    """A node as operators see it: what it reports, against its channel's head."""

    node: Node
    head: int | None  # the channel's current revision (None: no such channel)
    lag: int | None  # head - revision served (None: unknown)
    heartbeat_age_s: float
    stale: bool  # reported stale, or silent for longer than the registry tolerates


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
