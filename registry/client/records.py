"""The records the registry API answers with, as the client hands them out (plain dicts).

One `TypedDict` per response schema of `registry/api/schemas.py` (`BackbonePublic` ->
`Backbone`, ...): the same field names, JSON types (a `datetime` arrives as an ISO string).
`tests/registry/test_client_records.py` holds the two sides together, so a field added to
one fails until the other follows.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

State = Literal["candidate", "approved", "rejected", "revoked"]
Role = Literal["reader", "publisher", "approver", "evaluator", "node", "admin"]
Verdict = Literal["pass", "fail", "missing", "no_baseline", "mismatch"]


class Health(TypedDict):
    status: str


class TokenCreated(TypedDict):
    id: int
    name: str
    role: Role
    token: str
    node_id: str | None


class TokenInfo(TypedDict):
    id: int
    name: str
    role: Role
    created_at: str
    node_id: str | None


class Backbone(TypedDict):
    id: int
    name: str
    root: str
    tensor_count: int
    param_count: int
    manifest_digest: str
    created_at: str


class Capability(TypedDict):
    name: str
    description: str
    order: int | None


class Adapter(TypedDict):
    id: int
    name: str
    capability: str
    backbone: str
    version: int
    label: str | None
    parent_id: int | None
    state: State
    rank: int
    alpha: float
    target_modules: list[str]
    files: dict[str, str]
    manifest_root: str
    provenance: dict[str, Any]
    created_by: str
    created_at: str
    card: str | None
    tags: dict[str, str]
    parent_name: str | None
    decided_by: str | None
    decided_at: str | None
    reason: str | None
    approved_by: str | None


class AdapterPage(TypedDict):
    items: list[Adapter]
    total: int  # counted up to 10,000
    total_exact: NotRequired[bool]  # False: more than `total` (absent from older servers)


class Lineage(TypedDict):
    ancestors: list[Adapter]
    adapter: Adapter
    descendants: list[Adapter]


class Benchmark(TypedDict):
    name: str
    version: int
    dataset_digest: str
    scope: str
    metric: str
    direction: Literal["higher", "lower"]
    tolerance: float


class Evaluation(TypedDict):
    id: int
    benchmark: str
    benchmark_version: int
    library_digest: str | None
    adapter_id: int | None
    score: float
    n: int
    items_digest: str | None
    provenance: dict[str, Any]
    created_by: str
    created_at: str


class EvaluationDetail(Evaluation):
    """An evaluation with its per-item scores (None when it was posted without them)."""

    items: dict[str, float] | None


class LibraryEntry(TypedDict):
    adapter_id: int
    name: str
    manifest_root: str
    files: dict[str, str]


class Revision(TypedDict):
    channel: str
    backbone: str
    revision: int
    library: dict[str, LibraryEntry]
    order: list[str]
    library_digest: str
    created_by: str
    created_at: str
    reason: str | None
    order_missing: list[str]
    required_benchmarks: list[str]


class GateCheck(TypedDict):
    benchmark: str
    version: int
    scope: str
    baseline: float | None
    candidate: float | None
    delta: float | None
    tolerance: float
    verdict: Verdict
    test: Literal["paired_bootstrap", "point"] | None
    n: int | None
    ci_low: float | None
    ci_high: float | None
    baseline_evaluation: int | None
    candidate_evaluation: int | None
    baseline_by: str | None
    candidate_by: str | None
    detail: str | None


class GateReport(TypedDict):
    passed: bool
    checks: list[GateCheck]
    library_digest: str | None
    baseline_library_digest: str | None
    seed: str | None
    resamples: int | None
    confidence: float | None


class PromoteResult(TypedDict):
    revision: Revision
    gate: GateReport


class Node(TypedDict):
    id: str
    channel: str
    revision: int | None
    audit: dict[str, Any]
    audit_ok: bool
    last_heartbeat: str
    library_digest: str | None
    head: int | None
    lag: int | None
    heartbeat_age_s: float
    heartbeat_s: float | None  # the interval the node stated
    stale: bool


class Event(TypedDict):
    id: int
    actor: str
    action: str
    subject: str
    payload: dict[str, Any]
    created_at: str
    prev_hash: str
    hash: str


class EventsVerification(TypedDict):
    ok: bool
    count: int
    first_broken: int | None
    detail: str
