"""Typed errors of the storage package.

StorageError
├── InvalidSafetensorsError (+ ValueError)   a file that is not valid safetensors
├── ManifestError (+ ValueError)            bad manifest JSON, duplicate tensor names
├── BlobNotFoundError (+ FileNotFoundError) no blob with that digest in the store
├── DigestMismatchError (+ ValueError)      bytes whose sha256 is not the expected one
├── InvalidDigestError (+ ValueError)       a key that is not a lowercase sha256 hex string
└── UnknownStoreError (+ ValueError)        a store URL whose scheme has no backend
"""

from __future__ import annotations

import os


class StorageError(Exception):
    """Base of every error raised by `storage`."""


class InvalidSafetensorsError(StorageError, ValueError):
    """The file (or stream) is not a valid safetensors file; the message names it."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


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
