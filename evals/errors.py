"""Typed errors of the evals package.

EvalError
├── SuiteError (+ ValueError)          a suite directory that is missing, malformed or tampered
├── SuiteSpecError (+ ValueError)      generation settings that cannot make a suite
├── ExpressionError (+ ValueError)     a `calculate` expression outside safe arithmetic
└── UnknownDocumentError (+ KeyError)  `fetch_document` of an id the knowledge base lacks
"""

from __future__ import annotations


class EvalError(Exception):
    """Base of every error raised by `evals`."""


class SuiteError(EvalError, ValueError):
    """A suite on disk that cannot be used as it is (missing file, bad JSON, wrong digest)."""


class SuiteSpecError(EvalError, ValueError):
    """Generation settings that cannot produce a suite (too few questions, unknown suite)."""


class ExpressionError(EvalError, ValueError):
    """An expression `calculate` refuses: not arithmetic, too large, or dividing by zero."""


class UnknownDocumentError(EvalError, KeyError):
    def __init__(self, doc_id: str) -> None:
        self.doc_id = doc_id
        super().__init__(f"no document {doc_id!r} in the knowledge base")

    def __str__(self) -> str:
        return str(self.args[0])
