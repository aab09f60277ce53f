"""ORM rows -> frozen domain objects, built while the session is open."""

from __future__ import annotations

from typing import Any

from registry.db.models import (
    SqlAdapterVersion,
    SqlBackbone,
    SqlBenchmark,
    SqlCapability,
    SqlEvaluation,
    SqlNode,
    SqlRevision,
    SqlToken,
)
from registry.domain import (
    AdapterState,
    AdapterVersion,
    Backbone,
    Benchmark,
    Capability,
    Evaluation,
    LibraryEntry,
    Node,
    Revision,
    Role,
    TokenInfo,
)


def to_token(row: SqlToken) -> TokenInfo:
    return TokenInfo(
        id=row.id,
        name=row.name,
        role=Role(row.role),
        created_at=row.created_at,
        principal_id=row.principal_id,
        node_id=row.node_id,
    )


def to_backbone(row: SqlBackbone) -> Backbone:
    return Backbone(
        id=row.id,
        name=row.name,
        root=row.root,
        tensor_count=row.tensor_count,
        param_count=row.param_count,
        manifest_digest=row.manifest_digest,
        created_at=row.created_at,
    )


def to_capability(row: SqlCapability) -> Capability:
    return Capability(name=row.name, description=row.description, order=row.order)


def to_adapter(row: SqlAdapterVersion) -> AdapterVersion:
    return AdapterVersion(
        id=row.id,
        name=f"{row.capability.name}@{row.version}",
        capability=row.capability.name,
        backbone=row.backbone.root,
        version=row.version,
        label=row.label,
        parent_id=row.parent_id,
        parent_name=row.parent_name,
        state=AdapterState(row.state),
        rank=row.rank,
        alpha=row.alpha,
        target_modules=list(row.target_modules),
        files=dict(row.files),
        manifest_root=row.manifest_root,
        provenance=dict(row.provenance),
        created_by=row.created_by,
        created_at=row.created_at,
        card=row.card,
        tags={tag.key: tag.value for tag in row.tags},
        decided_by=row.decided_by,
        decided_at=row.decided_at,
        reason=row.reason,
    )


def _entry(value: dict[str, Any]) -> LibraryEntry:
    return LibraryEntry(
        adapter_id=int(value["adapter_id"]),
        name=str(value["name"]),
        manifest_root=str(value["manifest_root"]),
        files=dict(value["files"]),
    )


def to_revision(row: SqlRevision) -> Revision:
    return Revision(
        channel=row.channel.name,
        backbone=row.channel.backbone.root,
        revision=row.revision,
        library={cap: _entry(value) for cap, value in sorted(row.library.items())},
        order=list(row.order),
        library_digest=row.library_digest,
        created_by=row.created_by,
        created_at=row.created_at,
        reason=row.reason,
        order_missing=[cap for cap in row.order if cap not in row.library],
        required_benchmarks=list(row.channel.required_benchmarks or []),
    )


def to_benchmark(row: SqlBenchmark) -> Benchmark:
    return Benchmark(
        name=row.name,
        version=row.version,
        dataset_digest=row.dataset_digest,
        scope=row.scope,
        metric=row.metric,
        direction=row.direction,
        tolerance=row.tolerance,
    )


def to_evaluation(row: SqlEvaluation, *, with_items: bool = False) -> Evaluation:
    return Evaluation(
        id=row.id,
        benchmark=row.benchmark.name,
        benchmark_version=row.benchmark.version,
        library_digest=row.library_digest,
        adapter_id=row.adapter_id,
        score=row.score,
        n=row.n,
        items_digest=row.items_digest,
        created_by=row.created_by,
        created_at=row.created_at,
        provenance=dict(row.provenance or {}),
        items=dict(row.items) if with_items and row.items is not None else None,
    )


def to_node(row: SqlNode) -> Node:
    return Node(
        id=row.id,
        channel=row.channel,
        revision=row.revision,
        audit=dict(row.audit),
        audit_ok=row.audit_ok,
        last_heartbeat=row.last_heartbeat,
        library_digest=row.library_digest,
        stale=row.stale,
        lag=row.lag,
        heartbeat_s=row.heartbeat_s,
    )
