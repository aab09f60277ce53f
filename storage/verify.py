"""A reader that verifies a blob's sha256 as it streams: a mismatch raises at EOF."""

from __future__ import annotations

import io
from typing import Any, BinaryIO

from storage.digest import OverlappedSha256
from storage.errors import DigestMismatchError


class VerifyingReader(io.RawIOBase):
    """Hashes what is read from `raw`; at EOF raises DigestMismatchError on a mismatch.

    Each chunk is copied once and hashed on a helper thread while the caller consumes it.
    """

    def __init__(self, raw: BinaryIO, digest: str) -> None:
        super().__init__()
        self._raw = raw
        self._digest = digest
        self._hasher = OverlappedSha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        readinto = getattr(self._raw, "readinto", None)
        if readinto is not None:
            n = int(readinto(view) or 0)
            data = bytes(view[:n])  # the caller may reuse `buffer` while we hash
        else:
            data = self._raw.read(len(view))
            n = len(data)
            view[:n] = data
        if n == 0:
            self._verify()
            return 0
        self._hasher.update(data)
        return n

    def close(self) -> None:
        self._hasher.close()
        super().close()

    def _verify(self) -> None:
        actual = self._hasher.hexdigest()
        if actual != self._digest:
            raise DigestMismatchError(self._digest, actual)
