"""The research task world: fictional worlds, their documents and questions, from a seed.

`build_research` makes one world per split (train, dev, test) from `name:seed` and returns
their documents (the knowledge base, ids `d000`...) and questions with gold documents; the
research suite (`evals.suite`) writes them as files. `default_world()` is the world that
needs no suite: the research suite's default at seed 0, behind the runtime's built-in search
tool and the demo; `sample_questions` draws from its train split what
`weact data generate` solves. Same arguments, same bytes.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tasks.documents import Document, build_documents
from tasks.questions import Question, make_questions
from tasks.search import SearchIndex
from tasks.world import NamePool, WorldSize, build_world

SPLITS = ("train", "dev", "test")
DEFAULT_SIZES = {"train": 25, "dev": 10, "test": 40}
DEFAULT_NAME = "research"


@dataclass(frozen=True)
class Research:
    documents: tuple[Document, ...]
    questions: dict[str, tuple[Question, ...]]  # split -> questions
    index: SearchIndex


def build_research(name: str, seed: int, per_kind: Mapping[str, int]) -> Research:
    """`per_kind[split]` questions of each kind per split, over worlds drawn from `name:seed`."""
    pool = NamePool(random.Random(f"{name}:{seed}:names"))
    worlds = [
        build_world(
            split,
            random.Random(f"{name}:{seed}:world:{split}"),
            pool,
            WorldSize.for_questions(per_kind[split]),
        )
        for split in SPLITS
    ]
    documents = tuple(build_documents(worlds))
    doc_of = {d.entity: d.id for d in documents}
    questions = {
        w.split: tuple(
            q.with_documents(doc_of)
            for q in make_questions(
                w, per_kind[w.split], random.Random(f"{name}:{seed}:questions:{w.split}")
            )
        )
        for w in worlds
    }
    return Research(documents, questions, SearchIndex(documents))


@functools.cache
def default_world() -> Research:
    """The research suite's default world at seed 0 (built once per process)."""
    return build_research(DEFAULT_NAME, 0, DEFAULT_SIZES)


def sample_questions(n: int, seed: int, phases: Sequence[str]) -> list[Question]:
    """`n` train questions of the default world, question i drawn from `seed:i`; with a
    `code` phase only the questions that compute something (they carry an expression)."""
    pool = [
        q
        for q in default_world().questions["train"]
        if "code" not in phases or q.expression is not None
    ]
    return [random.Random(f"{seed}:{i}").choice(pool) for i in range(n)]
