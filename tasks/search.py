"""BM25 search over a suite's knowledge base (the `bm25s` package), and fetching by id.

Each document is indexed as its title followed by its text, so a query naming an entity ranks
that entity's own document first and the documents that merely mention it, or its near-miss
twin, after it. Ranking is by BM25 score, ties broken by document id, so results are the same
on every run. A hit is `{"id", "text"}`: the model sees what it needs and nothing that varies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tasks.documents import Document
from tasks.errors import UnknownDocumentError

DEFAULT_K = 2
MAX_K = 10
MAX_QUERY_CHARS = 500


class SearchIndex:
    """A BM25 index over documents; `search` ranks, `fetch` returns one by id."""

    def __init__(self, documents: Sequence[Document]) -> None:
        import bm25s

        self.documents = tuple(documents)
        self._by_id = {d.id: d for d in self.documents}
        corpus = [f"{d.title}. {d.text}" for d in self.documents]
        tokens = bm25s.tokenize(corpus, stopwords="en", return_ids=False, show_progress=False)
        self._bm25 = bm25s.BM25()
        self._bm25.index(tokens, show_progress=False)
        self._vocab = set(self._bm25.vocab_dict)

    def _query_tokens(self, query: str) -> list[str]:
        import bm25s

        tokens = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)
        return [t for t in tokens[0] if t in self._vocab]

    def search(self, query: str, k: int = DEFAULT_K) -> list[dict[str, Any]]:
        """The `k` best documents for `query` as `{"id", "text"}`; empty when nothing matches."""
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        if len(query) > MAX_QUERY_CHARS:
            raise ValueError(f"query must be at most {MAX_QUERY_CHARS} characters")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise ValueError(f"k must be an integer between 1 and {MAX_K}")
        tokens = self._query_tokens(query)
        if not tokens:
            return []
        scores = self._bm25.get_scores(tokens)
        ranked = sorted(
            (i for i in range(len(self.documents)) if scores[i] > 0),
            key=lambda i: (-float(scores[i]), self.documents[i].id),
        )
        return [self.hit(self.documents[i]) for i in ranked[:k]]

    @staticmethod
    def hit(document: Document) -> dict[str, Any]:
        return {"id": document.id, "text": document.text}

    def fetch(self, doc_id: str) -> dict[str, Any]:
        """One document by id, with its title; `UnknownDocumentError` otherwise."""
        document = self._by_id.get(doc_id) if isinstance(doc_id, str) else None
        if document is None:
            raise UnknownDocumentError(str(doc_id))
        return {"id": document.id, "title": document.title, "text": document.text}
