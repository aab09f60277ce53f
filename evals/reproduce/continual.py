"""The continual part through a real registry (`weact serve`) and its paired-test gate.

prod starts as plan + search + write. Then LoRA-code is added, write is updated to write++
(trained on new data only; `publish_adapter` refuses replay), and a deliberately bad write
(trained on shuffled answers) is proposed. Before each promotion an evaluator principal
(not the publisher) posts per-item masked NLL on the test split's phase samples: one
library-scoped evaluation keyed by the candidate library's digest (from a dry-run gate) and
one per capability the promotion brings in. The gate pairs them with the current library's.
Backbone and untouched adapters must keep their manifest roots across every revision.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evals.reproduce.build import Built
from evals.reproduce.cache import adapter_root
from evals.reproduce.config import Sizes
from evals.suite import Suite, trajectories_file

CHANNEL = "prod"
BASE = ("plan", "search", "write")
DESCRIPTIONS = {
    "plan": "Split the question into sub-questions.",
    "search": "Search for each fact.",
    "write": "Write the answer.",
    "code": "Compute with calculate.",
}


@dataclass
class Promotion:
    name: str
    adapters: dict[str, int]  # capability -> adapter id brought in
    expected: bool  # should the gate pass?
    passed: bool
    report: dict[str, Any]
    revision: int | None  # the new revision, None when refused


@dataclass
class ContinualResult:
    promotions: list[Promotion] = field(default_factory=list)
    roots: dict[str, Any] = field(default_factory=dict)
    roots_ok: bool = False
    replay: dict[str, bool] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.roots_ok and all(p.passed == p.expected for p in self.promotions)


def gate_trajectories(suite: Suite, per_kind: int) -> list[Any]:
    """The first `per_kind` test questions of each kind, in suite order: the items the NLL
    benchmarks score (a forward pass over every test phase sample per adapter would cost more
    than the whole episode budget on 2 cores)."""
    counts: dict[str, int] = {}
    picked = set()
    for q in suite.questions["test"]:
        if counts.get(q.kind, 0) < per_kind:
            counts[q.kind] = counts.get(q.kind, 0) + 1
            picked.add(q.id)
    return [t for t in suite.trajectories["test"] if t.id in picked]


class NllBook:
    """Masked NLL of the test phase samples, per (capability, adapter), computed once."""

    def __init__(self, backbone: Path, suite: Suite, per_kind: int) -> None:
        from transformers import AutoTokenizer

        from trainers.phases import build_samples

        tokenizer = AutoTokenizer.from_pretrained(backbone)
        self.backbone = backbone
        self.samples = build_samples(gate_trajectories(suite, per_kind), tokenizer)
        self.capabilities = sorted({s.capability for s in self.samples})
        self._done: dict[tuple[str, str | None], Any] = {}

    def score(self, capability: str, adapter: Path | None) -> Any:
        from trainers.evaluate import evaluate_nll

        key = (capability, str(adapter) if adapter else None)
        if key not in self._done:
            group = [s for s in self.samples if s.capability == capability]
            scores = evaluate_nll(
                backbone=self.backbone, samples=group, assignment={capability: adapter}
            )
            self._done[key] = scores[capability]
        return self._done[key]

    def library(self, library: Mapping[str, Path]) -> dict[str, Any]:
        """{capability: score} of every capability's samples (bare backbone when absent)."""
        return {c: self.score(c, library.get(c)) for c in self.capabilities}


class Story:
    def __init__(self, registry: Any, built: Built, suite: Suite, suite_dir: Path,
                 backbone: Path, sizes: Sizes) -> None:  # fmt: skip
        from registry.client import RegistryClient

        self.registry = registry
        self.built = built
        self.suite = suite
        self.data = [suite_dir / trajectories_file("test")]
        self.sizes = sizes
        self.book = NllBook(backbone, suite, sizes.gate_items)
        admin_token = registry.bootstrap_token("admin", "admin")
        self.admin = RegistryClient(registry.url, admin_token)
        self.clients = {"admin": self.admin}
        for name, role in (("alice", "publisher"), ("bob", "approver"), ("ci", "evaluator")):
            token = self.admin.create_token(name=name, role=role)["token"]
            self.clients[name] = RegistryClient(registry.url, token)
        manifest = _manifest(backbone)
        self.backbone_root = self.admin.register_backbone(name="backbone", manifest=manifest)[
            "root"
        ]
        self.local: dict[int, Path] = {}  # adapter id -> local directory
        self.ids: dict[str, int] = {}  # adapter name -> id
        self.result = ContinualResult()

    def close(self) -> None:
        for client in self.clients.values():
            client.close()

    def capability(self, name: str, order: int) -> None:
        """The capability, and the masked-NLL benchmark scoped to it (a benchmark needs its
        capability); the library-scoped benchmark comes with the first capability."""
        self.admin.create_capability(name=name, description=DESCRIPTIONS[name], order=order)
        if order == 0:
            self._benchmark("research-nll", "library")
        self._benchmark(f"{name}-nll", name)

    def _benchmark(self, name: str, scope: str) -> None:
        self.admin.create_benchmark(
            name=name, version=1, dataset_digest=self.suite.digest, scope=scope,
            metric="nll", direction="lower", tolerance=self.sizes.tolerance,
        )  # fmt: skip

    def publish(self, name: str, capability: str, parent: str | None = None) -> int:
        from trainers.publish import publish_adapter

        path = self.built.adapters[name]
        pushed = publish_adapter(
            path, client=self.clients["alice"], capability=capability,
            parent_id=self.ids[parent] if parent else None, label=name,
        )  # fmt: skip
        approved = self.clients["bob"].approve(pushed["id"])
        self.ids[name], self.local[approved["id"]] = approved["id"], path
        self.result.replay[name] = bool(pushed["provenance"].get("replay"))
        return int(approved["id"])

    def _current(self) -> dict[str, Any] | None:
        from registry import errors

        try:
            return dict(self.admin.get_channel(CHANNEL))
        except errors.NotFoundError:
            return None

    def promote(
        self, name: str, adapters: dict[str, int], order: list[str], expected: bool
    ) -> Promotion:
        from evals.reproduce.post import post_scores
        from registry import errors

        current = self._current()
        revision = current["revision"] if current else None
        bob = self.clients["bob"]
        args: dict[str, Any] = {
            "backbone": self.backbone_root,
            "order": order,
            "expected_revision": revision,
            "create": current is None,  # the first promotion makes the channel
        }
        dry = bob.gate(CHANNEL, adapters, **args)
        entries = current["library"] if current else {}
        library = {c: self.local[e["adapter_id"]] for c, e in entries.items()}
        library |= {c: self.local[i] for c, i in adapters.items()}
        scores = self.book.library(library)
        post_scores(self.clients["ci"], scores, self.data, self.suite.digest,
                    library_digest=dry["library_digest"], adapters=adapters)  # fmt: skip
        try:
            done = bob.promote(CHANNEL, adapters, reason=name, **args)
            promotion = Promotion(name, adapters, expected, True, dict(done["gate"]),
                                  done["revision"]["revision"])  # fmt: skip
        except errors.GateFailedError as exc:
            report = exc.detail if isinstance(exc.detail, dict) else {"detail": str(exc.detail)}
            promotion = Promotion(name, adapters, expected, False, report, None)
        self.result.promotions.append(promotion)
        return promotion

    def check_roots(self, backbone: Path, before: Mapping[str, str]) -> None:
        """Every revision keeps the backbone; a capability a promotion did not bring in keeps
        its manifest root; the files on disk still have the roots they had at the start."""
        revisions = sorted(self.admin.channel_revisions(CHANNEL), key=lambda r: r["revision"])
        problems = []
        brought = {p.revision: set(p.adapters) for p in self.result.promotions if p.revision}
        for prev, rev in zip(revisions, revisions[1:], strict=False):
            if rev["backbone"] != self.backbone_root:
                problems.append(f"r{rev['revision']}: backbone {rev['backbone']}")
            for cap, entry in prev["library"].items():
                if cap in brought.get(rev["revision"], set()):
                    continue
                kept = rev["library"].get(cap)
                if kept is None or kept["manifest_root"] != entry["manifest_root"]:
                    problems.append(f"r{rev['revision']}: {cap} changed its manifest root")
        after = {"backbone": adapter_root(backbone)} | {
            n: adapter_root(p) for n, p in self.built.adapters.items() if n in before
        }
        problems += [f"{n}: root on disk changed" for n in before if before[n] != after.get(n)]
        head = revisions[-1]
        self.result.roots = {
            "backbone": self.backbone_root,
            "revisions": [r["revision"] for r in revisions],
            "head": {c: e["manifest_root"] for c, e in head["library"].items()},
            "problems": problems,
        }
        self.result.roots_ok = not problems and self.backbone_root == before["backbone"]


def _manifest(backbone: Path) -> dict[str, Any]:
    from storage.manifest import manifest_of_path

    return manifest_of_path(backbone).to_json()


def run_continual(built: Built, suite: Suite, suite_dir: Path, backbone: Path, workdir: Path,
                  sizes: Sizes) -> ContinualResult:  # fmt: skip
    """The whole story on a fresh embedded registry in `workdir`."""
    from registry.launcher import embedded_registry

    workdir.mkdir(parents=True, exist_ok=True)
    names = ("plan", "search", "write", "code")
    before = {"backbone": adapter_root(backbone)} | {
        n: adapter_root(built.adapters[n]) for n in names
    }
    with embedded_registry(workdir) as registry:
        story = Story(registry, built, suite, suite_dir, backbone, sizes)
        try:
            for order, cap in enumerate(BASE):
                story.capability(cap, order)
            ids = {cap: story.publish(cap, cap) for cap in BASE}
            story.promote("plan + search + write", ids, list(BASE), expected=True)
            story.capability("code", len(BASE))
            code = story.publish("code", "code")
            story.promote("add LoRA-code", {"code": code}, [*BASE, "code"], expected=True)
            plus = story.publish("write++", "write", parent="write")
            story.promote(
                "write -> write++ (no replay)", {"write": plus}, [*BASE, "code"], expected=True
            )
            bad = story.publish("write-bad", "write", parent="write++")
            story.promote("write++ -> bad write (shuffled answers)", {"write": bad},
                          [*BASE, "code"], expected=False)  # fmt: skip
            story.check_roots(backbone, before)
        finally:
            story.close()
    return story.result
