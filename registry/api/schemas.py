"""Request and response schemas, one class per direction. Inputs forbid unknown fields."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from registry.domain import AdapterState, Role


class In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class ErrorBody(Out):
    error: str
    detail: Any


class Health(Out):
    status: str


class TokenCreate(In):
    name: str = Field(min_length=1, max_length=128)
    role: Role


class TokenCreated(Out):
    id: int
    name: str
    role: Role
    token: str


class BlobPublic(Out):
    digest: str
    size: int


class TensorIn(In):
    name: str
    dtype: str
    shape: list[int]
    digest: str


class ManifestIn(In):
    root: str | None = None
    tensors: list[TensorIn]


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
    name: str
    description: str = Field(default="", max_length=4096)
    order: int | None = None


class CapabilityPublic(Out):
    name: str
    description: str
    order: int | None


class Provenance(In):
    data_digests: list[str] = Field(default_factory=list)
    capabilities: list[str] = Field(default_factory=list)
    replay: bool = False
    trainer: dict[str, Any] = Field(default_factory=dict)
    seed: int | None = None
    code_version: str | None = None


class AdapterCreate(In):
    capability: str
    backbone: str
    parent_id: int | None = None
    label: str | None = Field(default=None, max_length=128)
    files: dict[str, str]
    provenance: Provenance = Field(default_factory=Provenance)


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


class AdapterPage(Out):
    items: list[AdapterPublic]
    total: int


class LineagePublic(Out):
    ancestors: list[AdapterPublic]
    adapter: AdapterPublic
    descendants: list[AdapterPublic]


class Decision(In):
    reason: str | None = Field(default=None, max_length=4096)


class BenchmarkCreate(In):
    name: str = Field(min_length=1, max_length=128)
    version: int = Field(ge=1)
    dataset_digest: str
    scope: str
    metric: str = Field(min_length=1, max_length=64)
    direction: Literal["higher", "lower"]
    tolerance: float = Field(ge=0)


class BenchmarkPublic(Out):
    name: str
    version: int
    dataset_digest: str
    scope: str
    metric: str
    direction: str
    tolerance: float


class EvaluationCreate(In):
    benchmark: str
    benchmark_version: int
    library_digest: str | None = None
    adapter_id: int | None = None
    score: float = Field(allow_inf_nan=False)
    n: int = Field(ge=1)
    items_digest: str | None = None


class EvaluationPublic(Out):
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


class PromoteRequest(In):
    backbone: str | None = None
    adapters: dict[str, int | None] = Field(default_factory=dict)
    order: list[str] | None = None
    expected_revision: int | None = None
    reason: str | None = Field(default=None, max_length=4096)


class RollbackRequest(In):
    to_revision: int = Field(ge=1)
    expected_revision: int | None = None
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


class GateReportPublic(Out):
    passed: bool
    checks: list[GateCheckPublic]


class PromotePublic(Out):
    revision: RevisionPublic
    gate: GateReportPublic


class AuditIn(In):
    ok: bool
    backbone_root: str | None = None
    adapters: dict[str, str] = Field(default_factory=dict)
    detail: str | None = None


class HeartbeatIn(In):
    channel: str
    revision: int | None = Field(default=None, ge=0)
    audit: AuditIn


class NodePublic(Out):
    id: str
    channel: str
    revision: int | None
    audit: dict[str, Any]
    audit_ok: bool
    last_heartbeat: datetime


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
