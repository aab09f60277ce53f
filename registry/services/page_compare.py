"""Read models for an adapter's own page and the side-by-side of two versions.

``adapter_extras`` gathers what the version page shows beside ``page_models.adapter_detail``:
each file's size and each benchmark's score across the versions of its capability.
``compare_adapters`` puts two versions side by side: their configuration, the tensors whose
bytes differ (read from both weights' manifests) and their evaluations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from registry.domain import AdapterVersion, Evaluation
from registry.services import adapters, blobs, page_queries
from registry.services.page_queries import ScorePoint
from storage import BlobStore, TensorEntry


@dataclass(frozen=True)
class AdapterExtras:
    sizes: dict[str, int]
    scores: dict[str, list[ScorePoint]]


@dataclass(frozen=True)
class ConfigRow:
    field: str
    left: Any
    right: Any

    @property
    def same(self) -> bool:
        return bool(self.left == self.right)


@dataclass(frozen=True)
class TensorChange:
    name: str
    change: str  # added | removed | changed
    left: TensorEntry | None
    right: TensorEntry | None


@dataclass(frozen=True)
class ScorePair:
    benchmark: str
    left: float | None
    right: float | None

    @property
    def delta(self) -> float | None:
        return None if self.left is None or self.right is None else self.right - self.left


@dataclass(frozen=True)
class AdapterComparison:
    left: AdapterVersion
    right: AdapterVersion
    config: list[ConfigRow]
    tensors: list[TensorChange]
    unchanged_tensors: int
    scores: list[ScorePair]


def adapter_extras(*, session: Session, store: BlobStore, adapter: AdapterVersion) -> AdapterExtras:
    """The size of each of ``adapter``'s files, and its capability's scores by version."""
    sizes = {name: blobs.blob_size(store=store, digest=d) for name, d in adapter.files.items()}
    scores = page_queries.score_series(session=session, adapter_id=adapter.id)
    return AdapterExtras(sizes=sizes, scores=scores)


def _config(left: AdapterVersion, right: AdapterVersion) -> list[ConfigRow]:
    trainer = "provenance.trainer"
    rows = [
        ConfigRow("capability", left.capability, right.capability),
        ConfigRow("backbone", left.backbone, right.backbone),
        ConfigRow("label", left.label, right.label),
        ConfigRow("state", left.state.value, right.state.value),
        ConfigRow("parent", left.parent_name, right.parent_name),
        ConfigRow("rank", left.rank, right.rank),
        ConfigRow("alpha", left.alpha, right.alpha),
        ConfigRow("target modules", sorted(left.target_modules), sorted(right.target_modules)),
        ConfigRow("manifest root", left.manifest_root, right.manifest_root),
        ConfigRow("tags", left.tags, right.tags),
    ]
    keys = sorted(
        set(left.provenance.get("trainer") or {}) | set(right.provenance.get("trainer") or {})
    )
    for key in keys:
        rows.append(
            ConfigRow(
                f"{trainer}.{key}",
                (left.provenance.get("trainer") or {}).get(key),
                (right.provenance.get("trainer") or {}).get(key),
            )
        )
    return rows


def _tensors(
    store: BlobStore, left: AdapterVersion, right: AdapterVersion
) -> tuple[list[TensorChange], int]:
    before = {t.name: t for t in adapters.weights_manifest(store=store, adapter=left).tensors}
    after = {t.name: t for t in adapters.weights_manifest(store=store, adapter=right).tensors}
    changes: list[TensorChange] = []
    unchanged = 0
    for name in sorted(before.keys() | after.keys()):
        old, new = before.get(name), after.get(name)
        if old is None:
            changes.append(TensorChange(name, "added", None, new))
        elif new is None:
            changes.append(TensorChange(name, "removed", old, None))
        elif old != new:
            changes.append(TensorChange(name, "changed", old, new))
        else:
            unchanged += 1
    return changes, unchanged


def _latest(evaluations: list[Evaluation]) -> dict[str, float]:
    """``benchmark@version`` -> the latest score (evaluations come oldest first)."""
    return {f"{e.benchmark}@{e.benchmark_version}": e.score for e in evaluations}


def compare_adapters(
    *, session: Session, store: BlobStore, left_id: int, right_id: int
) -> AdapterComparison:
    """Two versions side by side (``NotFoundError`` names one that does not exist)."""
    left = adapters.get_adapter(session=session, adapter_id=left_id)
    right = adapters.get_adapter(session=session, adapter_id=right_id)
    tensors, unchanged = _tensors(store, left, right)
    before = _latest(page_queries.adapter_evaluations(session=session, adapter_id=left_id))
    after = _latest(page_queries.adapter_evaluations(session=session, adapter_id=right_id))
    scores = [
        ScorePair(b, before.get(b), after.get(b)) for b in sorted(before.keys() | after.keys())
    ]
    return AdapterComparison(
        left=left,
        right=right,
        config=_config(left, right),
        tensors=tensors,
        unchanged_tensors=unchanged,
        scores=scores,
    )
