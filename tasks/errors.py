"""Typed errors of the task world.

TaskError
├── TaskSpecError (+ ValueError)       settings that cannot make the tasks asked for
├── ExpressionError (+ ValueError)     a `calculate` expression outside safe arithmetic
└── UnknownDocumentError (+ KeyError)  `fetch_document` of an id the knowledge base lacks
"""

from __future__ import annotations


class TaskError(Exception):
    """Base of every error raised by `tasks`."""


class TaskSpecError(TaskError, ValueError):
    """Settings that cannot produce the tasks asked for (unknown phase, a search that misses)."""


class ExpressionError(TaskError, ValueError):
    """An expression `calculate` refuses: not arithmetic, too large, or dividing by zero."""


class UnknownDocumentError(TaskError, KeyError):
    def __init__(self, doc_id: str) -> None:
        self.doc_id = doc_id
        super().__init__(f"no document {doc_id!r} in the knowledge base")

    def __str__(self) -> str:
        return str(self.args[0])
