"""A small blob is verified with slots of its size, not 8 MiB ones, and still verified.

Checking 100,000 adapter versions' few-KiB blobs (`weact fsck`) spent most of its time
zeroing an 8 MiB ring slot per read; the reader now sizes its slots from the file.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest

from storage.digest import CHUNK_SIZE
from storage.errors import DigestMismatchError
from storage.verify import VerifyingReader


def _reader(path: Path, digest: str) -> VerifyingReader:
    return VerifyingReader(open(path, "rb", buffering=0), digest)  # noqa: SIM115


@pytest.mark.parametrize("size", [0, 1, 5000, CHUNK_SIZE + 3])
def test_a_file_is_read_whole_in_slots_no_bigger_than_it(tmp_path: Path, size: int) -> None:
    data = bytes(i % 251 for i in range(size))
    path = tmp_path / "blob"
    path.write_bytes(data)
    with _reader(path, hashlib.sha256(data).hexdigest()) as reader:
        assert reader.read() == data
        assert all(len(slot) <= min(CHUNK_SIZE, size + 1) for slot in reader._ring)


def test_a_small_corrupted_file_still_fails_its_digest(tmp_path: Path) -> None:
    path = tmp_path / "blob"
    path.write_bytes(b"x" * 5000)
    with _reader(path, hashlib.sha256(b"y" * 5000).hexdigest()) as reader:
        with pytest.raises(DigestMismatchError):
            reader.drain()


def test_a_stream_without_a_file_keeps_full_pieces() -> None:
    data = b"z" * 100
    with VerifyingReader(io.BytesIO(data), hashlib.sha256(data).hexdigest()) as reader:
        assert reader.drain() == 100
        assert [len(slot) for slot in reader._ring][:1] == [CHUNK_SIZE]
