"""Hash a stream while writing it to a file: the pipeline of local puts and of `get_file`.

This thread reads the source; one helper thread hashes each chunk while another writes it
(storage.pipeline stages, DEPTH chunks queued each), so reading, hashing and writing run at
once on different cores (hashlib and file I/O release the GIL). A source with `readinto` (a
file, a spooled upload, an S3 body) is read into a ring of DEPTH + 2 reusable buffers that
both helpers use in place: no copy in user space and no fresh multi-MiB allocation per
chunk (page faults and unmaps that cost more than a copy once helper threads run). A slot
is refilled only once both helpers are done with the chunk it held: after `submit` returns,
a stage holds at most DEPTH queued chunks and one in hand, all newer than the chunk
DEPTH + 2 back. Other sources (iterables of bytes) pass their chunks through as they come.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import BinaryIO

from storage.digest import CHUNK_SIZE, OverlappedSha256, iter_chunks
from storage.pipeline import Chunk, Stage
from storage.writeback import WRITEBACK_BYTES, FileWriter

DEPTH = 2
"""Chunks queued for each helper; the ring holds DEPTH + 2 chunks."""
INLINE_BELOW = OverlappedSha256.INLINE_BELOW


def hash_and_write(
    src: BinaryIO | Iterable[bytes],
    out: BinaryIO,
    *,
    writeback: bool,
    name: str,
    chunk_size: int = CHUNK_SIZE,
) -> tuple[str, int]:
    """Write every byte of `src` to `out` (unbuffered); return their sha256 and count.

    `writeback` starts the disk writes as the file grows (for a file about to be fsynced).
    Raises the first failure of reading, hashing or writing, once both helpers are joined.
    """
    writer = FileWriter(out, writeback_bytes=WRITEBACK_BYTES if writeback else None)
    with (
        OverlappedSha256(depth=DEPTH) as hasher,
        Stage(writer, depth=DEPTH, inline_below=INLINE_BELOW, name=name) as stage,
    ):
        for chunk in read_chunks(src, chunk_size):
            hasher.update(chunk)
            stage.submit(chunk)
        stage.finish()
        return hasher.hexdigest(), writer.written


def read_chunks(
    src: BinaryIO | Iterable[bytes], chunk_size: int = CHUNK_SIZE, slots: int = DEPTH + 2
) -> Iterator[Chunk]:
    """The non-empty chunks of `src`: views of `slots` reusable buffers, filled in turn,
    when it has `readinto`; else its chunks as `bytes` (storage.digest.iter_chunks).

    A view is valid until `slots - 1` more chunks have been taken.
    """
    readinto = getattr(src, "readinto", None)
    if readinto is None:
        yield from iter_chunks(src, chunk_size)
        return
    ring: list[memoryview] = []
    filled = 0  # chunks read so far; the next goes to slot filled % slots
    while True:
        if len(ring) < slots:
            ring.append(memoryview(bytearray(chunk_size)))  # allocated as the stream needs
        slot = ring[filled % slots]
        n = int(readinto(slot) or 0)
        if n == 0:
            return
        yield slot[:n]
        filled += 1
