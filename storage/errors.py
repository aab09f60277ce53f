"""Typed errors of the storage package.

StorageError
├── InvalidSafetensorsError (+ ValueError)   a file that is not valid safetensors
│   └── HeaderLimitError                     a header over a `HeaderLimits` bound (`.limit`)
├── ManifestError (+ ValueError)            bad manifest JSON, duplicate tensor names
├── BlobNotFoundError (+ FileNotFoundError) no blob with that digest in the store
├── DigestMismatchError (+ ValueError)      bytes whose sha256 is not the expected one
├── InvalidDigestError (+ ValueError)       a key that is not a lowercase sha256 hex string
├── UnknownStoreError (+ ValueError)        a store URL whose scheme has no backend
├── StoreUnavailableError (+ OSError)       a store that cannot be used (no bucket, bad
│                                           credentials, a directory that is not writable)
└── AdapterFormatError (+ ValueError)       a LoRA adapter outside the supported PEFT format,
                                            or that does not fit its backbone (`.problems`)
"""

from __future__ import annotations

import os
from collections.abc import Sequence


class StorageError(Exception):
    """Base of every error raised by `storage`."""


class InvalidSafetensorsError(StorageError, ValueError):
    """The file (or stream) is not a valid safetensors file; the message names it."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class HeaderLimitError(InvalidSafetensorsError):
    """A header over one of the caller's `HeaderLimits`: `limit` names the field
    (`max_header_bytes`, `max_tensors`, `max_dims`, `max_elements`), `bound` its value."""

    def __init__(self, path: str | os.PathLike[str], limit: str, bound: int, problem: str) -> None:
        self.limit = limit
        self.bound = bound
        super().__init__(path, f"{problem} (limit {limit} = {bound})")


class ManifestError(StorageError, ValueError):
    """A manifest that cannot be built or read (duplicates, bad JSON, root mismatch)."""


class BlobNotFoundError(StorageError, FileNotFoundError):
    """The store holds no blob with this digest."""

    def __init__(self, digest: str, where: str = "") -> None:
        self.digest = digest
        suffix = f" in {where}" if where else ""
        super().__init__(f"blob {digest} not found{suffix}")


class DigestMismatchError(StorageError, ValueError):
    """Bytes hashed to `actual` where `expected` was required."""

    def __init__(self, expected: str, actual: str) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(f"sha256 mismatch: expected {expected}, got {actual}")


class InvalidDigestError(StorageError, ValueError):
    """A blob key that is not a sha256 digest (64 lowercase hex characters)."""

    def __init__(self, digest: object) -> None:
        self.digest = digest
        super().__init__(f"not a sha256 digest (64 lowercase hex characters): {digest!r}")


class UnknownStoreError(StorageError, ValueError):
    """No blob store backend for this URL scheme."""


class StoreUnavailableError(StorageError, OSError):
    """A store that cannot be used as configured (`check_store`); the message is one line
    naming the store and the problem."""

    def __init__(self, url: str, problem: str) -> None:
        self.url = url
        self.problem = problem
        super().__init__(f"blob store {url}: {problem}")

    def __str__(self) -> str:
        return str(self.args[0])


class AdapterFormatError(StorageError, ValueError):
    """A LoRA adapter that cannot be used as given; `problems` lists every problem found, each
    naming its config field or tensor (see `storage.lora`)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems) or ["the adapter is not a PEFT LoRA adapter"]
        count = len(self.problems)
        super().__init__(f"{count} problem(s) with the LoRA adapter: " + "; ".join(self.problems))
