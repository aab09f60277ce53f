"""A thousand adapter versions, recorded quickly through the service layer.

``seed_versions`` copies the files of one pushed version (``template``) into ``count`` new
versions of a capability: each is checked and recorded by ``adapters.record_adapter`` (the
write half of a push: blobs present, parent fits, next version number, audit event); only
reading the weights again is skipped, and each gets an identity of its own. Versions come
in lines of ``chain`` (each the child of the one before); every tenth is approved, tags
cycle through ``batch=b0..b3``, cards say ``bulk card N``, and every version of the first
line gets a score on ``bulk-quality`` (for the chart).
"""

from __future__ import annotations

import hashlib

from registry.db.models import SqlBackbone, SqlCapability
from registry.db.session import Database
from registry.domain import AdapterVersion, Benchmark, Principal, Role
from registry.services import adapters, evaluations, lifecycle
from registry.services.adapters import AdapterDraft, VerifiedAdapter
from storage import BlobStore

PUBLISHER = Principal(name="bulk-publisher", role=Role.PUBLISHER)
APPROVER = Principal(name="bulk-approver", role=Role.APPROVER)
BENCHMARK = Benchmark(
    name="bulk-quality",
    version=1,
    dataset_digest="b" * 64,
    scope="bulk",
    metric="accuracy",
    direction="higher",
    tolerance=0.01,
)


def _verified(
    template: AdapterVersion, ids: tuple[int, int], n: int, parent: int | None
) -> VerifiedAdapter:
    tags = {"batch": f"b{n % 4}"}
    draft = AdapterDraft(
        capability=template.capability,
        backbone=template.backbone,
        files={k: v for k, v in template.files.items() if k != "README.md"},
        parent_id=parent,
        label=f"bulk-{n:04d}",
        provenance={"capabilities": [template.capability], "seed": n},
        tags=tags,
    )
    return VerifiedAdapter(
        draft=draft,
        capability_id=ids[0],
        backbone_id=ids[1],
        rank=template.rank,
        alpha=template.alpha,
        target_modules=template.target_modules,
        manifest_root=template.manifest_root,
        card=f"# bulk {n}\n\nbulk card {n}\n",
        tags=tags,
        identity=hashlib.sha256(f"bulk-{n}".encode()).hexdigest(),
    )


def seed_versions(
    db: Database, store: BlobStore, template_id: int, count: int = 1000, chain: int = 27
) -> list[int]:
    """Record ``count`` versions like ``template_id`` (see the module docstring); their ids."""
    ids: list[int] = []
    with db.write() as session:
        template = adapters.get_adapter(session=session, adapter_id=template_id)
        capability = session.query(SqlCapability).filter_by(name=template.capability).one()
        backbone = session.query(SqlBackbone).filter_by(root=template.backbone).one()
        evaluations.create_benchmark(session=session, actor=APPROVER, benchmark=BENCHMARK)
        parent: int | None = None
        for n in range(count):
            parent = None if n % chain == 0 else parent
            verified = _verified(template, (capability.id, backbone.id), n, parent)
            made = adapters.record_adapter(
                session=session, store=store, actor=PUBLISHER, verified=verified
            )
            parent = made.id
            ids.append(made.id)
            if n % 10 == 0:
                lifecycle.approve_adapter(
                    session=session, actor=APPROVER, adapter_id=made.id, reason=None
                )
            if n < chain:
                score = 0.5 + 0.3 * (n % 7) / 7
                draft = evaluations.EvaluationDraft(
                    benchmark=BENCHMARK.name,
                    benchmark_version=1,
                    score=score,
                    n=20,
                    adapter_id=made.id,
                )
                evaluations.create_evaluation(session=session, actor=APPROVER, draft=draft)
    return ids
