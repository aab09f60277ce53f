"""A reader that verifies a blob's sha256 as it streams: a mismatch raises at EOF.

The raw stream is read in `chunk_size` pieces (fresh immutable `bytes`), each handed to a
helper thread for hashing while the caller consumes it: reading, hashing and whatever the
caller does with the bytes overlap, and a read of a whole chunk returns the very object the
raw read produced (no copy). At most `depth + 2` chunks are alive: queued for the hasher,
being hashed, and the one being served.
"""

from __future__ import annotations

import io
from typing import Any, BinaryIO

from storage.digest import CHUNK_SIZE, OverlappedSha256
from storage.errors import DigestMismatchError


class VerifyingReader(io.BufferedIOBase):
    """Buffered reads of `raw` whose bytes must hash to `digest`; checked at EOF.

    The bytes of a corrupted blob are returned until the end, where the read that hits EOF
    raises DigestMismatchError (and so does every read after it).
    """

    def __init__(self, raw: BinaryIO, digest: str, chunk_size: int = CHUNK_SIZE) -> None:
        super().__init__()
        self._raw = raw
        self._digest = digest
        self._chunk_size = chunk_size
        self._hasher = OverlappedSha256()
        self._chunk = b""
        self._pos = 0
        self._at_eof = False

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return b"".join(iter(lambda: self._next_piece(self._chunk_size), b""))
        parts = []
        while size > 0 and (piece := self._next_piece(size)):
            parts.append(piece)
            size -= len(piece)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def read1(self, size: int | None = -1) -> bytes:
        return self._next_piece(self._chunk_size if size is None or size < 0 else size)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        n = 0
        while n < len(view) and (piece := self._next_piece(len(view) - n)):
            view[n : n + len(piece)] = piece
            n += len(piece)
        return n

    def readinto1(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        piece = self._next_piece(len(view))
        view[: len(piece)] = piece
        return len(piece)

    def close(self) -> None:
        self._hasher.close()
        super().close()

    def _next_piece(self, limit: int) -> bytes:
        """Up to `limit` bytes from the current chunk or a new raw read; b"" at a good EOF."""
        if self._pos >= len(self._chunk) and not self._fill(max(limit, self._chunk_size)):
            return b""
        if self._pos == 0 and limit >= len(self._chunk):
            piece, self._chunk = self._chunk, b""
            return piece
        piece = self._chunk[self._pos : self._pos + limit]
        self._pos += len(piece)
        return piece

    def _fill(self, size: int) -> bool:
        if self.closed:
            raise ValueError("read of a closed blob stream")
        data = b"" if self._at_eof else self._raw.read(size)
        if not data:
            self._at_eof = True
            self._verify()
            return False
        self._chunk, self._pos = data if type(data) is bytes else bytes(data), 0
        self._hasher.update(self._chunk)
        return True

    def _verify(self) -> None:
        actual = self._hasher.hexdigest()
        if actual != self._digest:
            raise DigestMismatchError(self._digest, actual)
