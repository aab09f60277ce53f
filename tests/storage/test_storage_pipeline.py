"""The pipeline stage under puts and verified reads: order kept, in-flight chunks bounded,
failures raised in the caller and never a thread left behind; the verifying reader."""

from __future__ import annotations

import gc
import hashlib
import io
import os
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storage import DigestMismatchError
from storage.digest import OverlappedSha256
from storage.hashwrite import DEPTH, hash_and_write
from storage.pipeline import Chunk, Stage
from storage.verify import VerifyingReader
from storage.writeback import WRITE_PIECE, FileWriter, start_writeback

MIB = 1024 * 1024


class _Trickle(io.RawIOBase):
    """A sink that takes at most `limit` bytes per write (a writer lagging behind the
    reader) and records the size of each write it was handed."""

    def __init__(self, limit: int | None = 64 * 1024) -> None:
        self.got = bytearray()
        self.calls: list[int] = []
        self._limit = limit

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self.calls.append(len(memoryview(b)))
        piece = memoryview(b)[: self._limit]
        self.got += piece
        return len(piece)


def _stage_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "test-stage"]


def test_chunks_are_applied_in_order_inline_then_threaded() -> None:
    seen: list[bytes] = []
    chunks = [bytes([i]) * size for i, size in enumerate([1, 10, 200, 5000, 3, 7, 100_000, 2])]
    with Stage(seen.append, depth=2, inline_below=1000, name="test-stage") as stage:
        for chunk in chunks[:3]:
            stage.submit(chunk)
        assert seen == chunks[:3]  # small chunks before the thread is needed: inline
        assert _stage_threads() == []
        for chunk in chunks[3:]:
            stage.submit(chunk)
        stage.finish()
    assert seen == chunks
    assert _stage_threads() == []


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_a_slow_stage_holds_back_the_caller_at_depth_plus_one_chunks(depth: int) -> None:
    release = threading.Event()
    applied: list[Chunk] = []

    def slow(chunk: Chunk) -> None:
        release.wait(timeout=30)
        applied.append(chunk)

    stage = Stage(slow, depth=depth, name="test-stage")
    submitted = 0

    def produce() -> None:
        nonlocal submitted
        for i in range(depth + 5):
            stage.submit(bytes([i]))
            submitted += 1

    producer = threading.Thread(target=produce)
    producer.start()
    # One chunk in the slow function plus `depth` queued: the next submit must block.
    deadline = time.monotonic() + 30
    while submitted < depth + 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    producer.join(timeout=0.3)
    assert producer.is_alive()
    assert submitted == depth + 1
    assert applied == []
    release.set()
    producer.join(timeout=30)
    stage.finish()
    assert applied == [bytes([i]) for i in range(depth + 5)]


def test_a_failure_is_raised_in_the_caller_and_the_stage_never_blocks_it() -> None:
    def fail_on_third(chunk: Chunk) -> None:
        if chunk == b"2":
            raise OSError(28, "No space left on device")

    stage = Stage(fail_on_third, depth=1, name="test-stage")

    def feed() -> None:
        for i in range(50):
            stage.submit(str(i).encode())
        stage.finish()

    with pytest.raises(OSError, match="No space left"):  # by a later submit or by finish
        feed()
    with pytest.raises(OSError, match="No space left"):
        stage.finish()
    stage.close()
    assert _stage_threads() == []


def test_close_abandons_queued_chunks_and_joins() -> None:
    started, release = threading.Event(), threading.Event()
    applied: list[Chunk] = []

    def slow(chunk: Chunk) -> None:
        started.set()
        release.wait(timeout=30)
        applied.append(chunk)

    stage = Stage(slow, depth=3, name="test-stage")
    for i in range(4):
        stage.submit(bytes([i]))
    assert started.wait(timeout=30)
    closer = threading.Thread(target=stage.close)
    closer.start()
    release.set()
    closer.join(timeout=30)
    assert not closer.is_alive()
    assert _stage_threads() == []
    assert applied == [bytes([i]) for i in range(len(applied))]  # a prefix, in order
    settled = list(applied)
    stage.close()
    assert applied == settled  # nothing runs after close returned


def test_overlapped_sha256_equals_hashlib() -> None:
    pieces = [b"x" * n for n in (0, 1, 300_000, 5, 2 * MIB, 17)]
    with OverlappedSha256(depth=1) as hasher:
        for piece in pieces:
            hasher.update(piece)
        assert hasher.hexdigest() == hashlib.sha256(b"".join(pieces)).hexdigest()


def test_file_writer_writes_everything_and_starts_writeback(tmp_path: Path) -> None:
    path = tmp_path / "out"
    data = bytes(range(256)) * 4096  # 1 MiB
    with open(path, "wb", buffering=0) as fh:
        writer = FileWriter(fh, writeback_bytes=100_000)
        for i in range(0, len(data), 70_000):
            writer(data[i : i + 70_000])
        assert writer.written == len(data)
        assert start_writeback(fh.fileno(), 0, len(data)) in (True, False)
    assert path.read_bytes() == data


def test_file_writer_hands_write_at_most_a_piece() -> None:
    """Large write() calls cost several times the CPU in the page cache (see WRITE_PIECE)."""
    data = os.urandom(3 * WRITE_PIECE + 5)
    sink = _Trickle(limit=None)
    writer = FileWriter(sink, writeback_bytes=None)  # type: ignore[arg-type]
    writer(data)
    writer(memoryview(data)[:7])
    assert bytes(sink.got) == data + data[:7]
    assert max(sink.calls) == WRITE_PIECE
    assert len(sink.calls) == 5


def _reader(data: bytes, digest: str | None = None, chunk: int = 1000) -> VerifyingReader:
    return VerifyingReader(io.BytesIO(data), digest or hashlib.sha256(data).hexdigest(), chunk)


@pytest.mark.parametrize("sizes", [[1, 999, 1, 5000, 0, 3], [1000, 1000], [7] * 40, [100_000]])
def test_verifying_reader_serves_any_read_sizes(sizes: list[int]) -> None:
    data = bytes(range(256)) * 40
    out = bytearray()
    with _reader(data) as reader:
        for i, size in enumerate(sizes):
            if i % 3 == 2:
                buf = bytearray(size)
                out += buf[: reader.readinto(buf)]
            else:
                out += reader.read(size)
        out += reader.read()
        assert reader.read() == b""
        assert reader.read1(10) == b""
    assert bytes(out) == data


def test_verifying_reader_raises_at_eof_and_after() -> None:
    data = b"hello world" * 500
    wrong = hashlib.sha256(b"other").hexdigest()
    with _reader(data, wrong) as reader:
        assert reader.read(len(data)) == data  # the bytes come; the check is at EOF
        with pytest.raises(DigestMismatchError):
            reader.read(1)
        with pytest.raises(DigestMismatchError):
            reader.read()
    with _reader(data, wrong) as reader, pytest.raises(DigestMismatchError):
        reader.read()


def test_verifying_reader_refuses_reads_once_closed() -> None:
    reader = _reader(b"abc")
    reader.close()
    with pytest.raises(ValueError, match="closed"):
        reader.read(1)


@pytest.mark.parametrize("how", ["read", "readinto", "drain"])
def test_verifying_reader_memory_is_its_ring(tmp_path: Path, how: str) -> None:
    path = tmp_path / "blob"
    data = bytes(range(256)) * (48 * MIB // 256)
    path.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    del data
    chunk = MIB
    out = bytearray(chunk)
    gc.collect()  # garbage of earlier tests (moto runs in-process) is not ours to count
    tracemalloc.start()
    try:
        with open(path, "rb", buffering=0) as raw, VerifyingReader(raw, digest, chunk) as reader:
            if how == "read":
                while reader.read(chunk):
                    pass
            elif how == "readinto":
                while reader.readinto(out):
                    pass
            else:
                assert reader.drain() == 48 * MIB
            ring = reader.ring_size
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    served = chunk if how == "read" else 0  # read() returns a fresh copy; the others none
    assert peak < ring * chunk + served + 256 * 1024


def test_verifying_reader_reuses_its_ring_only_once_hashed(tmp_path: Path) -> None:
    """Pieces big enough to be hashed on the helper thread, the caller racing ahead: any
    slot refilled before it was hashed would break the digest or the bytes served."""
    data = os.urandom(16 * MIB + 123)
    path = tmp_path / "blob"
    path.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    for _ in range(3):
        with open(path, "rb", buffering=0) as raw, VerifyingReader(raw, digest, 256 * 1024) as r:
            assert r.read() == data


def test_hash_and_write_memory_is_its_ring(tmp_path: Path) -> None:
    """A file source is read into DEPTH + 2 reusable buffers, hashed and written in place."""
    path = tmp_path / "blob"
    data = bytes(range(256)) * (48 * MIB // 256)
    path.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    del data
    gc.collect()
    tracemalloc.start()
    try:
        with open(path, "rb") as src, open(tmp_path / "copy", "wb", buffering=0) as out:
            got = hash_and_write(src, out, writeback=False, name="test", chunk_size=MIB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == (digest, 48 * MIB)
    assert (tmp_path / "copy").stat().st_size == 48 * MIB
    assert peak < (DEPTH + 2) * MIB + 256 * 1024


@pytest.mark.parametrize("chunk", [1000, 256 * 1024])
@pytest.mark.parametrize("kind", ["file", "chunks"])
def test_hash_and_write_writes_and_hashes_every_byte_in_order(chunk: int, kind: str) -> None:
    """Slow and fast writers, chunks hashed inline or on the helper thread: a ring slot
    refilled before both helpers were done with it would break the digest or the copy."""
    data = os.urandom(4 * MIB + 77)
    for sink in (io.BytesIO(), _Trickle()):
        src = io.BytesIO(data) if kind == "file" else iter([data[:chunk], data[chunk:]])
        got = hash_and_write(src, sink, writeback=False, name="test", chunk_size=chunk)  # type: ignore[arg-type]
        assert got == (hashlib.sha256(data).hexdigest(), len(data))
        assert (sink.getvalue() if isinstance(sink, io.BytesIO) else bytes(sink.got)) == data


def test_hash_and_write_raises_a_source_failure_after_joining_its_helpers() -> None:
    def broken() -> Iterator[bytes]:
        yield os.urandom(MIB)
        raise ConnectionResetError("source went away")

    with pytest.raises(ConnectionResetError):
        hash_and_write(broken(), io.BytesIO(), writeback=False, name="test-stage")
    assert _stage_threads() == []
    assert not [t for t in threading.enumerate() if t.name == "sha256"]


def test_verifying_reader_drain_verifies() -> None:
    data = os.urandom(MIB + 5)
    with _reader(data, chunk=64 * 1024) as reader:
        assert reader.drain() == len(data)
        assert reader.drain() == 0
    with _reader(data, hashlib.sha256(b"other").hexdigest()) as reader:
        with pytest.raises(DigestMismatchError):
            reader.drain()
