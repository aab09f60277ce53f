"""The BlobStore protocol, the shared template of its backends, and `open_store`.

Blobs are content-addressed by the sha256 (hex) of their bytes. A put hashes while it
streams and stores nothing unless the stream ended cleanly and (if given) matched the
expected digest; a put of a blob already stored is a no-op. Reads are verified as they go:
a blob whose bytes no longer hash to its key raises DigestMismatchError at EOF. `get_file`
(a blob into a file) and `verify` (a blob read and dropped) are the zero-copy reads.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Protocol, cast, runtime_checkable
from urllib.parse import urlparse

from storage.digest import check_sha256
from storage.errors import DigestMismatchError, UnknownStoreError
from storage.hashwrite import hash_and_write
from storage.verify import VerifyingReader

BlobSource = BinaryIO | Iterable[bytes]


@runtime_checkable
class BlobStore(Protocol):
    """Content-addressed blob storage; keys are sha256 hex digests."""

    @property
    def url(self) -> str: ...

    def put(self, src: BlobSource, expected_sha256: str | None = None) -> str: ...

    def get(self, digest: str) -> bytes: ...

    def open(self, digest: str) -> AbstractContextManager[BinaryIO]: ...

    def get_file(self, digest: str, dest: str | os.PathLike[str]) -> int: ...

    def verify(self, digest: str) -> int: ...

    def exists(self, digest: str) -> bool: ...

    def size(self, digest: str) -> int: ...

    def delete(self, digest: str) -> None: ...

    def presigned_url(self, digest: str, expires: int = 3600) -> str | None: ...


class BaseBlobStore(ABC):
    """Template for backends: digest checks, the no-op put, verified reads.

    Backends implement `_put_new`, `_open_raw`, `exists`, `size`, `delete`, `url`.
    """

    @property
    @abstractmethod
    def url(self) -> str: ...

    def put(self, src: BlobSource, expected_sha256: str | None = None) -> str:
        """Store the bytes of `src` (file object or iterable of bytes); return their sha256.

        Raises DigestMismatchError (and stores nothing) when `expected_sha256` is given and
        differs. When that expected blob already exists the stream is not read at all.
        """
        if expected_sha256 is not None:
            check_sha256(expected_sha256)
            if self.exists(expected_sha256):
                return expected_sha256
        return self._put_new(src, expected_sha256)

    def get(self, digest: str) -> bytes:
        with self.open(digest) as fh:
            return fh.read()

    @contextmanager
    def open(self, digest: str) -> Iterator[BinaryIO]:
        """Stream a blob; reading it to EOF verifies its digest."""
        with self._verifying(digest) as reader:
            yield cast(BinaryIO, reader)

    def get_file(self, digest: str, dest: str | os.PathLike[str]) -> int:
        """Write a blob to the file `dest`, verified; return its size.

        The bytes go from reusable read buffers to a temp file beside `dest` while a helper
        thread hashes them (storage.hashwrite); the temp file is renamed to `dest` only once
        the digest matched. On any failure (DigestMismatchError for corrupted or truncated
        bytes, a failing read or write) it is removed and `dest` is left as it was. Like
        `cp`, no fsync; the file is created mode 0600.
        """
        target = Path(dest)
        raw = self._open_raw(check_sha256(digest))  # BlobNotFoundError before any file exists
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
            try:
                with open(fd, "wb", buffering=0) as out:
                    actual, size = hash_and_write(raw, out, writeback=False, name="get")
                check_expected(actual, digest)
                os.replace(tmp, target)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise
        finally:
            raw.close()
        return size

    def verify(self, digest: str) -> int:
        """Read a whole blob to check its digest, keeping none of it; return its size.

        DigestMismatchError when the stored bytes no longer hash to `digest`.
        """
        with self._verifying(digest) as reader:
            return reader.drain()

    def presigned_url(self, digest: str, expires: int = 3600) -> str | None:
        return None

    @contextmanager
    def _verifying(self, digest: str) -> Iterator[VerifyingReader]:
        raw = self._open_raw(check_sha256(digest))
        try:
            with VerifyingReader(raw, digest) as reader:
                yield reader
        finally:
            raw.close()

    @abstractmethod
    def _put_new(self, src: BlobSource, expected: str | None) -> str:
        """Store a blob not known to exist; clean up everything on any failure."""

    @abstractmethod
    def _open_raw(self, digest: str) -> BinaryIO:
        """Open the stored bytes; raise BlobNotFoundError when absent."""

    @abstractmethod
    def exists(self, digest: str) -> bool: ...

    @abstractmethod
    def size(self, digest: str) -> int: ...

    @abstractmethod
    def delete(self, digest: str) -> None:
        """Remove a blob; BlobNotFoundError when absent."""


def check_expected(digest: str, expected: str | None) -> None:
    """Raise DigestMismatchError when an expected digest was given and differs."""
    if expected is not None and digest != expected:
        raise DigestMismatchError(expected, digest)


BACKENDS: dict[str, str] = {
    "": "storage.local:LocalBlobStore",
    "file": "storage.local:LocalBlobStore",
    "s3": "storage.s3:S3BlobStore",
}
"""URL scheme -> `module:class`; the module is imported only when its scheme is used."""


def check_store(store: BlobStore) -> None:
    """Check that `store` can be used: `StoreUnavailableError` (one line) if not.

    Stores with a `check()` method (local directories, S3) run it: a local directory must
    be writable; an S3 bucket must exist and the credentials must list and write it.
    """
    check = getattr(store, "check", None)
    if check is not None:
        check()


def open_store(url: str, **options: Any) -> BlobStore:
    """A blob store for `url`: a plain path or file:// (local dir), s3://bucket/prefix."""
    scheme = urlparse(url).scheme.lower()
    if len(scheme) == 1:  # a Windows drive letter, not a scheme
        scheme = ""
    target = BACKENDS.get(scheme)
    if target is None:
        raise UnknownStoreError(f"no blob store for URL scheme {scheme!r} in {url!r}")
    module_name, cls_name = target.split(":")
    module = importlib.import_module(module_name)
    store: BlobStore = getattr(module, cls_name).from_url(url, **options)
    return store
