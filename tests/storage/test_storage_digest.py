"""Digest helpers."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from storage import InvalidDigestError, is_sha256, sha256_file
from storage.digest import OverlappedSha256, check_sha256, iter_chunks


@pytest.mark.parametrize("size", [0, 1, 1000, 3 * 1024 * 1024 + 5])
def test_sha256_file(tmp_path: Path, size: int) -> None:
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    path = tmp_path / "f"
    path.write_bytes(data)
    assert sha256_file(path, chunk_size=1024 * 1024) == hashlib.sha256(data).hexdigest()


def test_is_sha256() -> None:
    assert is_sha256("0" * 64)
    assert is_sha256(hashlib.sha256(b"").hexdigest())
    for bad in ["0" * 63, "0" * 65, "A" * 64, "z" * 64, " " + "0" * 63, None, 1, b"0" * 64]:
        assert not is_sha256(bad)
        with pytest.raises(InvalidDigestError):
            check_sha256(bad)


def test_iter_chunks_skips_empty_chunks() -> None:
    assert list(iter_chunks([b"a", b"", bytearray(b"bc")])) == [b"a", b"bc"]


def test_overlapped_sha256_equals_hashlib_for_mixed_sizes() -> None:
    pieces = [b"a" * n for n in (0, 1, 300_000, 5, 1_000_000, 262_143, 262_144)]
    with OverlappedSha256() as hasher:
        for piece in pieces:
            hasher.update(piece)
        assert hasher.hexdigest() == hashlib.sha256(b"".join(pieces)).hexdigest()
