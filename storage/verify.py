"""A reader that verifies a blob's sha256 as it streams: a mismatch raises at EOF.

The raw stream is read in `chunk_size` pieces into a small ring of reusable buffers; each
piece is hashed on a helper thread while the caller consumes it, so reading, hashing and
whatever the caller does with the bytes overlap. The ring has `depth + 2` slots: the hasher
is at most `depth + 1` pieces behind (its queue blocks), so a slot is only refilled once
its piece is hashed and served. Reusing buffers matters: fresh multi-MiB allocations per
read cost page faults and unmaps that, with a second thread running, cost more than the
copy out of the ring. Memory: the ring, whatever the blob size; a blob smaller than a piece
(its size known from its file) gets slots of its size, not `chunk_size` (zeroing 8 MiB
slots for a 5 KiB blob was most of the time of checking many small blobs).

`drain` reads to the end without copying anything out of the ring (a verification alone).
"""

from __future__ import annotations

import io
import os
from typing import Any, BinaryIO

from storage.digest import CHUNK_SIZE, OverlappedSha256
from storage.errors import DigestMismatchError

HASH_DEPTH = 1
"""Pieces queued for the hasher; the ring holds HASH_DEPTH + 2 pieces."""


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
        self._slot_size = min(chunk_size, _file_size(raw) + 1)  # a small blob: small slots
        self._hasher = OverlappedSha256(depth=HASH_DEPTH)
        self._ring: list[bytearray] = []
        self._filled = 0  # pieces read so far; the next goes to slot _filled % ring size
        self._chunk = memoryview(b"")
        self._pos = 0
        self._at_eof = False

    @property
    def ring_size(self) -> int:
        return HASH_DEPTH + 2

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return b"".join(iter(lambda: self.read1(self._chunk_size), b""))
        first = self.read1(size)
        if len(first) == size or not first:
            return first
        parts = [first]  # copied out: the slots they came from may be refilled
        size -= len(first)
        while size > 0 and (piece := self.read1(size)):
            parts.append(piece)
            size -= len(piece)
        return b"".join(parts)

    def read1(self, size: int | None = -1) -> bytes:
        return bytes(self._next_view(self._chunk_size if size is None or size < 0 else size))

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        n = 0
        while n < len(view) and (piece := self._next_view(len(view) - n)):
            view[n : n + len(piece)] = piece
            n += len(piece)
        return n

    def readinto1(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        piece = self._next_view(len(view))
        view[: len(piece)] = piece
        return len(piece)

    def drain(self) -> int:
        """Read (and so verify) the rest of the blob without keeping it; its byte count."""
        count = 0
        while piece := self._next_view(self._chunk_size):
            count += len(piece)
        return count

    def close(self) -> None:
        self._hasher.close()
        super().close()

    def _next_view(self, limit: int) -> memoryview:
        """Up to `limit` bytes of the current piece (valid until the next raw read), or a
        new piece; empty at a good EOF."""
        if limit <= 0 or (self._pos >= len(self._chunk) and not self._fill()):
            return memoryview(b"")
        view = self._chunk[self._pos : self._pos + limit]
        self._pos += len(view)
        return view

    def _fill(self) -> bool:
        if self.closed:
            raise ValueError("read of a closed blob stream")
        n = 0 if self._at_eof else self._read_piece()
        if n == 0:
            self._at_eof = True
            self._verify()
            return False
        self._hasher.update(self._chunk)
        return True

    def _read_piece(self) -> int:
        """Read the next piece into the next ring slot; set it as the current one."""
        index = self._filled % self.ring_size
        if index == len(self._ring):
            self._ring.append(bytearray(self._slot_size))
        slot = memoryview(self._ring[index])
        readinto = getattr(self._raw, "readinto", None)
        if readinto is not None:
            n = int(readinto(slot) or 0)
        else:
            data = self._raw.read(len(slot))
            n = len(data)
            slot[:n] = data
        self._chunk, self._pos = slot[:n], 0
        self._filled += 1
        return n

    def _verify(self) -> None:
        actual = self._hasher.hexdigest()
        if actual != self._digest:
            raise DigestMismatchError(self._digest, actual)


def _file_size(raw: Any) -> int:
    """The size of `raw`'s file when it has one (a local blob), else a size as big as any."""
    try:
        return os.fstat(raw.fileno()).st_size
    except (AttributeError, OSError, io.UnsupportedOperation):
        return 1 << 62
