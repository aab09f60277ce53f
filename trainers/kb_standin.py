"""A stand-in for `runtime.kb` (docs/CONTRACTS.md section 5) until it lands.

Same shape: `DOCUMENTS` and `search(query, k) -> [{"id", "title", "snippet", "score"}]`,
deterministic, scored by word overlap. `trainers.data` uses `runtime.kb` when present.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str


_DOCS = (
    Document("kb-001", "Paris", "Paris is the capital of France and its largest city."),
    Document("kb-002", "Eiffel Tower", "The Eiffel Tower in Paris was completed in 1889."),
    Document("kb-003", "LoRA", "LoRA adds trainable low-rank matrices to frozen weights."),
    Document("kb-004", "Transformers", "Transformers use attention over the whole context."),
    Document("kb-005", "KV cache", "A KV cache stores keys and values of past tokens."),
    Document("kb-006", "Python", "Python is a programming language created by Guido van Rossum."),
    Document("kb-007", "Mount Everest", "Mount Everest is the highest mountain above sea level."),
    Document("kb-008", "Photosynthesis", "Photosynthesis turns light, water and CO2 into sugar."),
)

DOCUMENTS = _DOCS


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def search(query: str, k: int = 3) -> list[dict[str, Any]]:
    q = _words(query)
    scored = []
    for doc in DOCUMENTS:
        words = _words(doc.title + " " + doc.text)
        score = len(q & words) / (len(q) or 1)
        scored.append((-score, doc.id, doc))
    scored.sort()
    return [
        {"id": d.id, "title": d.title, "snippet": d.text, "score": round(-s, 4)}
        for s, _, d in scored[:k]
    ]
