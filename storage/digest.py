"""sha256 digests of files and byte streams, and the check that a string is one."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from storage.errors import InvalidDigestError
from storage.pipeline import Stage

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
    """Yield the non-empty chunks of a binary file object or an iterable of bytes, as
    immutable `bytes` (pipeline stages hold on to them while the source moves on)."""
    read = getattr(src, "read", None)
    pieces = iter(lambda: read(chunk_size), b"") if read is not None else iter(src)
    for chunk in pieces:
        if chunk:
            yield chunk if type(chunk) is bytes else bytes(chunk)


class OverlappedSha256:
    """sha256 that hashes large updates on a helper thread (a pipeline `Stage`), overlapped
    with the caller's next read or write; up to `depth` updates wait in line. Updates keep
    their order; the caller must not modify a buffer it passed until `hexdigest` returns
    (pass `bytes`). Close it (or use it as a context manager) to stop the thread.
    """

    INLINE_BELOW = 256 * 1024

    def __init__(self, depth: int = 2) -> None:
        self._hasher = hashlib.sha256()
        self._stage = Stage(
            self._hasher.update, depth=depth, inline_below=self.INLINE_BELOW, name="sha256"
        )

    @property
    def depth(self) -> int:
        """Updates that may wait in line for the helper thread."""
        return self._stage.depth

    def update(self, data: bytes | bytearray | memoryview) -> None:
        self._stage.submit(data)

    def hexdigest(self) -> str:
        self._stage.finish()
        return self._hasher.hexdigest()

    def close(self) -> None:
        self._stage.close()

    def __enter__(self) -> OverlappedSha256:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
