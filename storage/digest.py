"""sha256 digests of files and byte streams, and the check that a string is one."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import BinaryIO

from storage.errors import InvalidDigestError

CHUNK_SIZE = 8 * 1024 * 1024
"""Read size for hashing and copying: large enough that hashlib releases the GIL and
syscall overhead vanishes, small enough to stay cache and memory friendly."""

_SHA256_RE = re.compile(r"[0-9a-f]{64}")


def is_sha256(value: object) -> bool:
    """True for a sha256 hex digest in canonical form (64 lowercase hex characters)."""
    return isinstance(value, str) and _SHA256_RE.fullmatch(value) is not None


def check_sha256(value: object) -> str:
    """Return `value` if it is a canonical sha256 digest, else raise InvalidDigestError."""
    if not is_sha256(value):
        raise InvalidDigestError(value)
    assert isinstance(value, str)
    return value


def sha256_file(path: str | os.PathLike[str], chunk_size: int = CHUNK_SIZE) -> str:
    """sha256 (hex) of a file's bytes, read in `chunk_size` pieces."""
    hasher = hashlib.sha256()
    view = memoryview(bytearray(chunk_size))
    with open(path, "rb", buffering=0) as fh:
        while n := fh.readinto(view):
            hasher.update(view[:n])
    return hasher.hexdigest()


def iter_chunks(src: BinaryIO | Iterable[bytes], chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
    """Yield the non-empty byte chunks of a binary file object or an iterable of bytes."""
    read = getattr(src, "read", None)
    if read is None:
        for chunk in src:
            if chunk:
                yield bytes(chunk) if not isinstance(chunk, bytes) else chunk
        return
    while chunk := read(chunk_size):
        yield chunk


class OverlappedSha256:
    """sha256 that hashes each large update on a helper thread, overlapped with the caller's
    next I/O (hashlib and file/socket I/O both release the GIL). At most one update is in
    flight; the caller must not modify the bytes it passed until the next call. Close it
    (or use it as a context manager) to stop the thread.
    """

    INLINE_BELOW = 256 * 1024

    def __init__(self) -> None:
        self._hasher = hashlib.sha256()
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future[None] | None = None

    def update(self, data: bytes | memoryview) -> None:
        self._wait()
        if len(data) < self.INLINE_BELOW:
            self._hasher.update(data)
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="sha256")
        self._pending = self._pool.submit(self._hasher.update, data)

    def hexdigest(self) -> str:
        self._wait()
        return self._hasher.hexdigest()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> OverlappedSha256:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()
