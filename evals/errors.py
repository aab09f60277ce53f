"""Typed errors of the evals package (the task world's own errors are in `tasks.errors`).

EvalError
├── SuiteError (+ ValueError)      a suite directory that is missing, malformed or tampered
└── SuiteSpecError (+ ValueError)  generation settings that cannot make a suite
"""

from __future__ import annotations


class EvalError(Exception):
    """Base of every error raised by `evals`."""


class SuiteError(EvalError, ValueError):
    """A suite on disk that cannot be used as it is (missing file, bad JSON, wrong digest)."""


class SuiteSpecError(EvalError, ValueError):
    """Generation settings that cannot produce a suite (too few questions, unknown suite)."""
