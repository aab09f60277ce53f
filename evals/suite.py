"""A benchmark suite: generated from a seed, written as files, loaded and verified by digest.

Layout of a suite directory:

    suite.json                       name, seed, sizes, {file: sha256}, digest
    kb.jsonl                         the knowledge base, one document per line
    questions-{train,dev,test}.jsonl the questions of each split
    trajectories-{train,dev,test}.jsonl  their gold trajectories (the trainers' format)

The suite's `digest` is the sha256 of the canonical JSON of `{"files": {name: sha256}}` over
every file but suite.json: it names the content, whatever seed or settings produced it, and
is what benchmarks record as their dataset digest. Generation is deterministic: the same
seed and sizes give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evals.errors import SuiteError, SuiteSpecError
from evals.manifest import MANIFEST, suite_digest, verified_manifest
from tasks.documents import Document
from tasks.questions import Question
from tasks.research import DEFAULT_SIZES, SPLITS, build_research
from tasks.search import SearchIndex
from trainers.tasks import gold_trajectory
from trainers.trajectory import Trajectory

SUITES = ("research",)
KB_FILE = "kb.jsonl"
MAX_PER_KIND = 1000


def questions_file(split: str) -> str:
    return f"questions-{split}.jsonl"


def trajectories_file(split: str) -> str:
    return f"trajectories-{split}.jsonl"


def _jsonl(rows: Sequence[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()


@dataclass(frozen=True)
class Suite:
    name: str
    seed: int
    sizes: dict[str, int]
    documents: tuple[Document, ...]
    questions: dict[str, tuple[Question, ...]]
    trajectories: dict[str, tuple[Trajectory, ...]]
    _index: list[SearchIndex] = field(default_factory=list, repr=False, compare=False)

    def index(self) -> SearchIndex:
        """The BM25 index over the knowledge base (built once, on first use)."""
        if not self._index:
            self._index.append(SearchIndex(self.documents))
        return self._index[0]

    def files(self) -> dict[str, bytes]:
        """Every file of the suite but the manifest, as bytes."""
        out = {KB_FILE: _jsonl([d.to_json() for d in self.documents])}
        for split in SPLITS:
            out[questions_file(split)] = _jsonl([q.to_json() for q in self.questions[split]])
            out[trajectories_file(split)] = _jsonl([t.to_json() for t in self.trajectories[split]])
        return out

    def manifest(self) -> dict[str, Any]:
        hashes = {name: hashlib.sha256(data).hexdigest() for name, data in self.files().items()}
        return {
            "name": self.name,
            "seed": self.seed,
            "sizes": dict(self.sizes),
            "files": hashes,
            "digest": suite_digest(hashes),
        }

    @property
    def digest(self) -> str:
        return str(self.manifest()["digest"])


def _check_sizes(sizes: Mapping[str, int]) -> dict[str, int]:
    if set(sizes) != set(SPLITS):
        raise SuiteSpecError(f"sizes must name the splits {', '.join(SPLITS)}")
    for split, n in sizes.items():
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_PER_KIND:
            raise SuiteSpecError(f"{split}: questions per kind must be 1..{MAX_PER_KIND}, got {n}")
    return {s: sizes[s] for s in SPLITS}


def generate_suite(
    name: str = "research", seed: int = 0, sizes: Mapping[str, int] | None = None
) -> Suite:
    """A suite of `sizes[split]` questions per kind and split; deterministic in every argument."""
    if name not in SUITES:
        raise SuiteSpecError(f"unknown suite {name!r}; known: {', '.join(SUITES)}")
    per_kind = _check_sizes(sizes if sizes is not None else DEFAULT_SIZES)
    research = build_research(name, seed, per_kind)
    suite = Suite(name, seed, per_kind, research.documents, research.questions, {})
    suite._index.append(research.index)
    for split in SPLITS:
        suite.trajectories[split] = tuple(
            gold_trajectory(q, research.index) for q in research.questions[split]
        )
    return suite


def write_suite(suite: Suite, out: str | os.PathLike[str]) -> Path:
    """Write the suite's files and its manifest into `out` (created; existing files replaced)."""
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    for name, data in suite.files().items():
        (target / name).write_bytes(data)
    manifest = json.dumps(suite.manifest(), indent=2, sort_keys=True) + "\n"
    (target / MANIFEST).write_text(manifest, encoding="utf-8")
    return target


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise SuiteError(f"{path}:{n}: not valid JSON: {exc.msg}") from None
    return rows


def load_suite(path: str | os.PathLike[str]) -> Suite:
    """A suite directory, verified file by file against its manifest; `SuiteError` otherwise."""
    from trainers.errors import TrajectoryError
    from trainers.trajectory import read_trajectories

    root = Path(path)
    manifest = verified_manifest(root)
    try:
        documents = tuple(Document.from_json(r) for r in _read_jsonl(root / KB_FILE))
        questions = {
            s: tuple(Question.from_json(r) for r in _read_jsonl(root / questions_file(s)))
            for s in SPLITS
        }
        trajectories = {s: tuple(read_trajectories(root / trajectories_file(s))) for s in SPLITS}
    except (KeyError, TypeError, TrajectoryError, FileNotFoundError) as exc:
        raise SuiteError(f"{root}: malformed suite ({exc})") from None
    return Suite(
        manifest["name"], manifest["seed"], manifest["sizes"], documents, questions, trajectories
    )
