"""Request and response schemas, one class per direction. Inputs forbid unknown fields."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from registry.api.schema_base import Documented
from registry.api.schema_base import Out as Out
from registry.api.schema_types import (
    DTYPES,
    TENSOR_NAME,
    JsonObject,
    NameStr,
    NodeIdStr,
    Sha256Str,
    Tags,
    node_id_for_node_tokens,
    one_subject,
)
from registry.api.schema_types import In as In  # re-exported: the routes build on them
from registry.domain import AdapterState, NodeStatus, Role

MAX_DB_INT = 2**31 - 1
DbInt = Annotated[int, Field(ge=0, le=MAX_DB_INT)]
DbId = Annotated[int, Field(ge=1, le=MAX_DB_INT)]
Score = Annotated[float, Field(allow_inf_nan=False)]


class ValidationIssue(Documented):
    loc: list[str | int]
    msg: str
    type: str | None = None


class ErrorBody(Documented):
    """Every error: a stable code and a message, the validation issues, or a structured
    detail (``digest_mismatch``, ``revision_conflict``, ``gate_failed``, ...)."""

    error: str
    detail: str | list[ValidationIssue] | dict[str, Any]


class Health(Out):
    status: str


class TokenCreate(In):
    model_config = ConfigDict(json_schema_extra=node_id_for_node_tokens)

    name: str = Field(min_length=1, max_length=128, description="The token's label.")
    role: Role
    principal: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        description="The identity the token acts as (default: `name`); all tokens of one "
        "principal are one person for the self-approval rule.",
    )
    node_id: NodeIdStr | None = Field(
        default=None,
        description="Node tokens only: the one node id this token may report as "
        "(default: the first one it reports as).",
    )


class TokenCreated(Out):
    id: int
    name: str
    role: Role
    token: str
    node_id: str | None = None


class TokenPublic(Out):
    id: int
    name: str
    role: Role
    created_at: datetime
    node_id: str | None = None


class BlobPublic(Documented):
    digest: str
    size: int


class TensorIn(In):
    name: str = Field(max_length=1024, json_schema_extra={"pattern": TENSOR_NAME})
    dtype: str = Field(max_length=16, json_schema_extra=DTYPES)
    shape: list[DbInt]
    digest: Sha256Str


class ManifestIn(In):
    root: Sha256Str | None = None
    tensors: list[TensorIn] = Field(json_schema_extra={"minItems": 1})


class BackboneCreate(In):
    name: str = Field(min_length=1, max_length=256)
    manifest: ManifestIn


class BackbonePublic(Out):
    id: int
    name: str
    root: str
    tensor_count: int
    param_count: int
    manifest_digest: str
    created_at: datetime


class CapabilityCreate(In):
    name: NameStr
    description: str = Field(default="", max_length=4096)
    order: DbInt | None = None


class CapabilityPublic(Out):
    name: str
    description: str
    order: int | None


class Provenance(In):
    data_digests: list[Sha256Str] = Field(default_factory=list)
    capabilities: list[NameStr] = Field(default_factory=list)
    replay: bool = False
    trainer: JsonObject = Field(default_factory=dict)
    seed: int | None = None
    code_version: str | None = Field(default=None, max_length=256)


class AdapterCreate(In):
    capability: NameStr
    backbone: str = Field(max_length=64)
    parent_id: DbId | None = None
    label: str | None = Field(default=None, max_length=128)
    files: dict[str, Sha256Str]  # PEFT config and weights; README.md and training.json optional
    provenance: Provenance = Field(default_factory=Provenance)
    tags: Tags = Field(default_factory=dict, description="key=value tags.")
    signature: JsonObject | None = Field(default=None, description="Publisher's DSSE.")


class AdapterPublic(Out):
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
    card: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    parent_name: str | None = Field(None, description="The parent as `capability@version`.")
    decided_by: str | None = Field(None, description="Who approved, rejected or revoked it.")
    decided_at: datetime | None = None
    reason: str | None = Field(None, description="The reason given with that decision.")
    approved_by: str | None = Field(None, description="Who approved it (one version's read).")


class AdapterPage(Out):
    items: list[AdapterPublic]
    total: int = Field(description="The matches, counted up to 10,000 (see total_exact).")
    total_exact: bool = Field(
        True, description="False when there are more matches than total (past 10,000)."
    )


class LineagePublic(Out):
    ancestors: list[AdapterPublic]
    adapter: AdapterPublic
    descendants: list[AdapterPublic]


class Decision(In):
    reason: str | None = Field(default=None, max_length=4096)


class BenchmarkCreate(In):
    name: str = Field(min_length=1, max_length=128)
    version: DbId
    dataset_digest: Sha256Str
    scope: NameStr
    metric: str = Field(min_length=1, max_length=64)
    direction: Literal["higher", "lower"]
    tolerance: float = Field(ge=0, allow_inf_nan=False)


class BenchmarkPublic(Out):
    name: str
    version: int
    dataset_digest: str
    scope: str
    metric: str
    direction: str
    tolerance: float


ItemId = Annotated[str, Field(min_length=1, max_length=128)]
MAX_ITEMS = 100_000


class EvaluationProvenance(In):
    """Where the scores come from; `dataset_digest` must be the benchmark's."""

    dataset_digest: Sha256Str | None = None
    engine: str | None = Field(default=None, max_length=256)
    policy: str | None = Field(default=None, max_length=256)
    code_version: str | None = Field(default=None, max_length=256)
    library: dict[str, str] | None = Field(default=None, max_length=64)  # capability -> name
    extra: JsonObject | None = Field(default=None, max_length=64)


class EvaluationCreate(In):
    model_config = ConfigDict(json_schema_extra=one_subject)
    benchmark: str = Field(max_length=128)
    benchmark_version: DbId
    library_digest: Sha256Str | None = None
    adapter_id: DbId | None = None
    score: Score
    n: DbId
    items_digest: Sha256Str | None = None
    items: dict[ItemId, Score] | None = Field(default=None, max_length=MAX_ITEMS)
    provenance: EvaluationProvenance | None = None


class EvaluationPublic(Out):
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
    created_at: datetime


class EvaluationDetail(EvaluationPublic):
    items: dict[str, float] | None


class LibraryEntryPublic(Out):
    adapter_id: int
    name: str
    manifest_root: str
    files: dict[str, str]


class RevisionPublic(Out):
    channel: str
    backbone: str
    revision: int
    library: dict[str, LibraryEntryPublic]
    order: list[str]
    library_digest: str
    created_by: str
    created_at: datetime
    reason: str | None
    order_missing: list[str] = Field(
        default_factory=list,
        description="Capabilities the hard order names that the library lacks (cannot run).",
    )
    required_benchmarks: list[str] = Field(
        default_factory=list, description="Benchmarks every gate of the channel must judge."
    )


class PromoteRequest(In):
    backbone: str | None = Field(default=None, max_length=64)
    adapters: dict[str, DbId | None] = Field(default_factory=dict)
    order: list[str] | None = None
    expected_revision: DbInt | None = None
    reason: str | None = Field(default=None, max_length=4096)
    create: bool = Field(default=False, description="Create the channel if it does not exist.")


class RollbackRequest(In):
    to_revision: DbId
    expected_revision: DbInt | None = None
    reason: str | None = Field(default=None, max_length=4096)


class GateCheckPublic(Out):
    benchmark: str
    version: int
    scope: str
    baseline: float | None
    candidate: float | None
    delta: float | None
    tolerance: float
    verdict: str
    test: str | None
    n: int | None
    ci_low: float | None
    ci_high: float | None
    baseline_evaluation: int | None
    candidate_evaluation: int | None
    baseline_by: str | None
    candidate_by: str | None
    detail: str | None


class GateReportPublic(Out):
    passed: bool
    checks: list[GateCheckPublic]
    library_digest: str | None
    baseline_library_digest: str | None
    seed: str | None
    resamples: int | None
    confidence: float | None


class PromotePublic(Out):
    revision: RevisionPublic
    gate: GateReportPublic


class AuditIn(In):
    ok: bool
    backbone_root: str | None = Field(default=None, max_length=64)
    adapters: dict[str, str] = Field(default_factory=dict)
    detail: str | None = Field(default=None, max_length=4096)


class HeartbeatIn(In):
    channel: NameStr
    revision: DbInt | None = None
    audit: AuditIn
    library_digest: str | None = Field(default=None, pattern="^[0-9a-f]{64}$")
    stale: bool = False  # the node cannot reach the registry (serves its last library)
    lag: DbInt | None = None  # revisions behind the head the node knows of
    heartbeat_s: float | None = Field(default=None, gt=0, le=86400)  # its interval


class NodePublic(Out):
    id: str
    channel: str
    revision: int | None
    audit: dict[str, Any]
    audit_ok: bool
    last_heartbeat: datetime
    library_digest: str | None
    head: int | None  # the channel's current revision
    lag: int | None  # head - revision
    heartbeat_age_s: float
    heartbeat_s: float | None  # the interval the node stated
    stale: bool  # reported stale, or silent for 2 of its heartbeats

    @classmethod
    def of(cls, status: NodeStatus) -> NodePublic:
        node = status.node
        return cls(
            id=node.id,
            channel=node.channel,
            revision=node.revision,
            audit=node.audit,
            audit_ok=node.audit_ok,
            last_heartbeat=node.last_heartbeat,
            library_digest=node.library_digest,
            head=status.head,
            lag=status.lag,
            heartbeat_age_s=round(status.heartbeat_age_s, 3),
            heartbeat_s=node.heartbeat_s,
            stale=status.stale,
        )


class EventPublic(Out):
    id: int
    actor: str
    action: str
    subject: str
    payload: dict[str, Any]
    created_at: datetime
    prev_hash: str
    hash: str


class VerifyPublic(Out):
    ok: bool
    count: int
    first_broken: int | None
    detail: str
