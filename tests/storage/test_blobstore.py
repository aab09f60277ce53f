"""One contract suite for every BlobStore backend: local directory and S3 (moto over HTTP)."""

from __future__ import annotations

import errno
import gc
import hashlib
import io
import os
import resource
import signal
import threading
import time
import tracemalloc
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from storage_helpers import random_tensors, write_st

from storage import (
    BlobNotFoundError,
    BlobStore,
    DigestMismatchError,
    InvalidDigestError,
    LocalBlobStore,
    StoreUnavailableError,
    UnknownStoreError,
    check_store,
    manifest_of_file,
    manifest_of_stream,
    open_store,
)
from storage.hashwrite import DEPTH as WRITE_DEPTH
from storage.s3 import S3BlobStore

THRESHOLD = 1024  # S3: blobs from this size go through multipart upload
PART_SIZE = 700
SIZES = [0, 1, THRESHOLD - 1, THRESHOLD, 5 * THRESHOLD + 3]
BIG_CHUNK = 512 * 1024  # from 256 KiB on, hashing and writing run on helper threads
BIG = 6 * BIG_CHUNK + 5


@dataclass
class StoreCase:
    store: BlobStore
    leftovers: Callable[[], list[str]]  # everything the backend holds, temp files included
    corrupt: Callable[[str, bytes], None]  # replace a stored blob's bytes behind its back


def _local_case(tmp_path: Path) -> StoreCase:
    store = LocalBlobStore(tmp_path / "blobs")

    def leftovers() -> list[str]:
        return sorted(str(p.relative_to(store.root)) for p in store.root.rglob("*") if p.is_file())

    def corrupt(digest: str, data: bytes) -> None:
        path = store.path_of(digest)
        os.chmod(path, 0o644)
        path.write_bytes(data)

    return StoreCase(store, leftovers, corrupt)


def _s3_case(
    url: str, endpoint: str, client: Any, threshold: int = THRESHOLD, part: int = PART_SIZE
) -> StoreCase:
    store = open_store(url, endpoint_url=endpoint, multipart_threshold=threshold, part_size=part)
    assert isinstance(store, S3BlobStore)

    def leftovers() -> list[str]:
        objects = client.list_objects_v2(Bucket=store.bucket).get("Contents", [])
        uploads = client.list_multipart_uploads(Bucket=store.bucket).get("Uploads", [])
        return sorted([o["Key"] for o in objects] + [f"upload:{u['Key']}" for u in uploads])

    def corrupt(digest: str, data: bytes) -> None:
        client.put_object(Bucket=store.bucket, Key=store.key_of(digest), Body=data)

    return StoreCase(store, leftovers, corrupt)


@pytest.fixture(params=["local", "s3"])
def case(request: pytest.FixtureRequest, tmp_path: Path) -> StoreCase:
    if request.param == "local":
        return _local_case(tmp_path)
    url = request.getfixturevalue("s3_store_url")
    return _s3_case(url, request.getfixturevalue("s3_server"), request.getfixturevalue("s3_client"))


@pytest.fixture(params=["local", "s3"])
def big_case(request: pytest.FixtureRequest, tmp_path: Path) -> StoreCase:
    """Stores for blobs of a few MiB (S3: multipart from 1 MiB, in 512 KiB parts)."""
    if request.param == "local":
        return _local_case(tmp_path)
    url = request.getfixturevalue("s3_store_url")
    endpoint, client = request.getfixturevalue("s3_server"), request.getfixturevalue("s3_client")
    return _s3_case(url, endpoint, client, 2 * BIG_CHUNK, BIG_CHUNK)


def _payload(size: int, seed: int = 0) -> bytes:
    return (hashlib.sha256(str(seed).encode()).digest() * (size // 32 + 1))[:size]


def _chunks(data: bytes, size: int = 300) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def _broken(data: bytes, after: int) -> Iterator[bytes]:
    yield data[:after]
    raise ConnectionResetError("client went away")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kind", ["file", "chunks"])
def test_put_get_round_trip(case: StoreCase, size: int, kind: str) -> None:
    data = _payload(size)
    src = io.BytesIO(data) if kind == "file" else _chunks(data)
    digest = case.store.put(src)
    assert digest == _sha(data)
    assert case.store.exists(digest)
    assert case.store.size(digest) == size
    assert case.store.get(digest) == data
    with case.store.open(digest) as fh:
        assert b"".join(iter(lambda: fh.read(333), b"")) == data
    assert len(case.leftovers()) == 1


@pytest.mark.parametrize("size", [10, 5 * THRESHOLD])
def test_put_with_the_right_expected_digest(case: StoreCase, size: int) -> None:
    data = _payload(size)
    assert case.store.put(_chunks(data), expected_sha256=_sha(data)) == _sha(data)
    assert case.store.get(_sha(data)) == data


def test_put_of_an_existing_blob_is_a_no_op(case: StoreCase) -> None:
    data = _payload(3 * THRESHOLD)
    digest = case.store.put(io.BytesIO(data))
    before = case.leftovers()
    assert case.store.put(_chunks(data)) == digest
    assert case.store.put(_broken(b"", 0), expected_sha256=digest) == digest  # never read
    assert case.leftovers() == before
    assert case.store.get(digest) == data


@pytest.mark.parametrize("size", [10, THRESHOLD, 5 * THRESHOLD])
def test_wrong_digest_leaves_nothing_behind(case: StoreCase, size: int) -> None:
    data = _payload(size)
    wrong = _sha(b"something else")
    with pytest.raises(DigestMismatchError) as info:
        case.store.put(_chunks(data), expected_sha256=wrong)
    assert (info.value.expected, info.value.actual) == (wrong, _sha(data))
    assert not case.store.exists(_sha(data))
    assert case.leftovers() == []


@pytest.mark.parametrize("after", [0, 10, THRESHOLD + 5, 4 * THRESHOLD])
def test_broken_stream_leaves_nothing_behind(case: StoreCase, after: int) -> None:
    with pytest.raises(ConnectionResetError):
        case.store.put(_broken(_payload(5 * THRESHOLD), after))
    assert case.leftovers() == []


def test_missing_blob(case: StoreCase) -> None:
    digest = _sha(b"never stored")
    assert not case.store.exists(digest)
    for call in (case.store.get, case.store.size, case.store.delete):
        with pytest.raises(BlobNotFoundError, match=digest):
            call(digest)
    with pytest.raises(FileNotFoundError), case.store.open(digest):
        pass


def test_delete(case: StoreCase) -> None:
    digest = case.store.put(_chunks(_payload(2 * THRESHOLD)))
    case.store.delete(digest)
    assert not case.store.exists(digest)
    assert case.leftovers() == []


@pytest.mark.parametrize("bad", ["", "abc", "A" * 64, "g" * 64, "../" + "a" * 61])
def test_keys_must_be_sha256_digests(case: StoreCase, bad: str) -> None:
    with pytest.raises(InvalidDigestError):
        case.store.exists(bad)
    with pytest.raises(InvalidDigestError):
        case.store.get(bad)
    with pytest.raises(InvalidDigestError):
        case.store.put(io.BytesIO(b"x"), expected_sha256=bad)
    assert case.leftovers() == []


@pytest.mark.parametrize("size", [10, 3 * THRESHOLD])
def test_corrupted_blob_fails_verification_at_eof(case: StoreCase, size: int) -> None:
    data = _payload(size)
    digest = case.store.put(io.BytesIO(data))
    case.corrupt(digest, data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(DigestMismatchError) as info:
        case.store.get(digest)
    assert info.value.expected == digest
    with case.store.open(digest) as fh:
        assert len(fh.read(size - 1)) == size - 1  # reading is fine until the end
        with pytest.raises(DigestMismatchError):
            fh.read()


def test_concurrent_puts_of_one_blob(case: StoreCase) -> None:
    data = _payload(6 * THRESHOLD + 7)
    results: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        try:
            results.append(case.store.put(_chunks(data, 256)))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert results == [_sha(data)] * 8
    assert case.store.get(_sha(data)) == data
    assert len(case.leftovers()) == 1


def test_presigned_url(case: StoreCase) -> None:
    data = _payload(100)
    digest = case.store.put(io.BytesIO(data))
    url = case.store.presigned_url(digest, expires=60)
    if isinstance(case.store, LocalBlobStore):
        assert url is None
        return
    assert url is not None
    with urllib.request.urlopen(url) as response:  # real HTTP to moto
        assert response.read() == data


def test_open_store_reopens_the_same_store(case: StoreCase) -> None:
    digest = case.store.put(io.BytesIO(b"hello"))
    s3 = isinstance(case.store, S3BlobStore)
    again = open_store(case.store.url, **({"endpoint_url": case.store.endpoint_url} if s3 else {}))
    assert type(again) is type(case.store)
    assert again.get(digest) == b"hello"


def test_each_s3_store_finds_its_own_credentials(
    s3_store_url: str, s3_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stores share botocore's data loader, never credentials: a store opened after they
    are gone has none, and one opened before still works."""
    before = open_store(s3_store_url, endpoint_url=s3_server)
    check_store(before)
    nowhere = str(tmp_path / "none")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    for name in ("AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
        monkeypatch.setenv(name, nowhere)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    after = open_store(s3_store_url, endpoint_url=s3_server)
    with pytest.raises(StoreUnavailableError, match="no S3 credentials"):
        check_store(after)
    check_store(before)


def test_manifest_of_a_stored_safetensors_blob(case: StoreCase, tmp_path: Path) -> None:
    path = write_st(tmp_path / "m.safetensors", random_tensors(seed=9, count=6))
    with open(path, "rb") as fh:
        digest = case.store.put(fh)
    with case.store.open(digest) as fh:
        manifest = manifest_of_stream(fh, case.store.size(digest), label=digest)
    assert manifest == manifest_of_file(path)


def test_open_store_schemes(tmp_path: Path) -> None:
    assert isinstance(open_store(str(tmp_path / "a")), LocalBlobStore)
    local = open_store((tmp_path / "b").as_uri())
    assert isinstance(local, LocalBlobStore)
    assert local.url == (tmp_path / "b").as_uri()
    s3 = open_store("s3://bucket/some/prefix/", endpoint_url="http://127.0.0.1:9")
    assert isinstance(s3, S3BlobStore)
    assert (s3.bucket, s3.prefix, s3.url) == ("bucket", "some/prefix", "s3://bucket/some/prefix")
    assert s3.key_of("a" * 64) == f"some/prefix/aa/aa/{'a' * 64}"
    for bad in ("gs://bucket/x", "http://example.com/x"):
        with pytest.raises(UnknownStoreError):
            open_store(bad)


def test_local_store_sweeps_stale_temp_files(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    stale, fresh = store.root / ".tmp" / "put-stale", store.root / ".tmp" / "put-fresh"
    stale.write_bytes(b"half a blob")
    fresh.write_bytes(b"a put in progress")
    old = time.time() - 2 * 24 * 3600
    os.utime(stale, (old, old))
    LocalBlobStore(tmp_path)
    assert not stale.exists()
    assert fresh.exists()


# The pipelined path: chunks large enough that hashing, writing and uploading run on helper
# threads. Every guarantee above must hold there too.


def _broken_chunks(data: bytes, after: int) -> Iterator[bytes]:
    yield from _chunks(data[:after], BIG_CHUNK)
    raise ConnectionResetError("client went away")


@pytest.mark.parametrize("kind", ["file", "chunks"])
def test_pipelined_round_trip(big_case: StoreCase, kind: str) -> None:
    data = _payload(BIG, seed=1)
    src = io.BytesIO(data) if kind == "file" else _chunks(data, BIG_CHUNK)
    digest = big_case.store.put(src)
    assert digest == _sha(data)
    assert big_case.store.get(digest) == data
    with big_case.store.open(digest) as fh:
        assert b"".join(iter(lambda: fh.read(BIG_CHUNK // 3), b"")) == data
    assert len(big_case.leftovers()) == 1


@pytest.mark.parametrize("after", [0, BIG_CHUNK, 3 * BIG_CHUNK + 7, BIG])
def test_pipelined_broken_stream_leaves_nothing_behind(big_case: StoreCase, after: int) -> None:
    with pytest.raises(ConnectionResetError):
        big_case.store.put(_broken_chunks(_payload(BIG), after))
    assert big_case.leftovers() == []
    assert not [t for t in threading.enumerate() if t.name in ("put", "sha256", "s3-parts")]


def test_pipelined_wrong_digest_leaves_nothing_behind(big_case: StoreCase) -> None:
    data = _payload(BIG, seed=2)
    with pytest.raises(DigestMismatchError):
        big_case.store.put(_chunks(data, BIG_CHUNK), expected_sha256=_sha(b"other"))
    assert big_case.leftovers() == []


def test_pipelined_read_of_a_corrupted_blob_fails_at_eof(big_case: StoreCase) -> None:
    data = _payload(BIG, seed=3)
    digest = big_case.store.put(io.BytesIO(data))
    flipped = bytearray(data)
    flipped[BIG // 2] ^= 0x40
    big_case.corrupt(digest, bytes(flipped))
    with pytest.raises(DigestMismatchError):
        big_case.store.get(digest)
    with big_case.store.open(digest) as fh:
        assert fh.read(BIG) == flipped
        with pytest.raises(DigestMismatchError):
            fh.read(1)


@contextmanager
def _file_size_limit(limit: int) -> Iterator[None]:
    """Writes past `limit` bytes of a file fail with EFBIG (not the SIGXFSZ signal)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def test_local_write_failure_leaves_nothing_behind(tmp_path: Path) -> None:
    """The writer thread hits the file size limit (EFBIG) half way through a put."""
    case = _local_case(tmp_path)
    with (
        _file_size_limit(2 * BIG_CHUNK),
        pytest.raises(OSError, match="too large") as info,
    ):
        case.store.put(_chunks(_payload(BIG), BIG_CHUNK))
    assert info.value.errno == errno.EFBIG
    assert case.leftovers() == []


def test_s3_part_upload_failure_aborts_the_upload(
    s3_store_url: str, s3_server: str, s3_client: Any
) -> None:
    case = _s3_case(s3_store_url, s3_server, s3_client, 2 * BIG_CHUNK, BIG_CHUNK)
    assert isinstance(case.store, S3BlobStore)
    calls = 0

    def fail_third_part(**_: object) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise ConnectionResetError("S3 went away")

    case.store._client.meta.events.register("before-call.s3.UploadPart", fail_third_part)
    with pytest.raises(ConnectionResetError, match="S3 went away"):
        case.store.put(_chunks(_payload(BIG), BIG_CHUNK))
    assert case.leftovers() == []


def test_local_put_holds_a_bounded_number_of_chunks(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    chunk = 1024 * 1024

    def source() -> Iterator[bytes]:
        for i in range(48):
            yield bytes([i]) * chunk

    gc.collect()  # garbage of earlier tests (moto runs in-process) is not ours to count
    tracemalloc.start()
    try:
        store.put(source())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Each helper (hashing, writing; both WRITE_DEPTH deep) is at most WRITE_DEPTH queued
    # plus one in hand behind the caller's chunk, and the source makes the next one.
    assert peak < (WRITE_DEPTH + 3) * chunk + 512 * 1024


# Zero-copy reads: `get_file` (a blob into a file, renamed into place once verified) and
# `verify` (a blob read and dropped). Same guarantees as `open`: nothing unverified is kept.


def _dest_dir(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    return out


@pytest.mark.parametrize("size", [*SIZES, BIG])
def test_get_file_writes_the_verified_blob(big_case: StoreCase, tmp_path: Path, size: int) -> None:
    data = _payload(size, seed=4)
    digest = big_case.store.put(_chunks(data, BIG_CHUNK))
    out = _dest_dir(tmp_path)
    assert big_case.store.get_file(digest, out / "blob.bin") == size
    assert (out / "blob.bin").read_bytes() == data
    assert [p.name for p in out.iterdir()] == ["blob.bin"]
    assert big_case.store.verify(digest) == size


@pytest.mark.parametrize("damage", ["flipped", "truncated", "longer"])
def test_get_file_of_a_damaged_blob_leaves_nothing(
    big_case: StoreCase, tmp_path: Path, damage: str
) -> None:
    data = _payload(BIG, seed=5)
    digest = big_case.store.put(io.BytesIO(data))
    bad = {
        "flipped": data[:BIG_CHUNK] + bytes([data[BIG_CHUNK] ^ 1]) + data[BIG_CHUNK + 1 :],
        "truncated": data[: 3 * BIG_CHUNK + 1],
        "longer": data + b"\0",
    }[damage]
    big_case.corrupt(digest, bad)
    out = _dest_dir(tmp_path)
    with pytest.raises(DigestMismatchError) as info:
        big_case.store.get_file(digest, out / "blob.bin")
    assert (info.value.expected, info.value.actual) == (digest, _sha(bad))
    assert list(out.iterdir()) == []
    with pytest.raises(DigestMismatchError):
        big_case.store.verify(digest)
    assert not [t for t in threading.enumerate() if t.name == "sha256"]


def test_get_file_keeps_an_existing_file_unless_verified(case: StoreCase, tmp_path: Path) -> None:
    data = _payload(3 * THRESHOLD, seed=6)
    digest = case.store.put(io.BytesIO(data))
    out = _dest_dir(tmp_path)
    (out / "blob.bin").write_bytes(b"previous")
    case.corrupt(digest, data[:-1])
    with pytest.raises(DigestMismatchError):
        case.store.get_file(digest, out / "blob.bin")
    assert (out / "blob.bin").read_bytes() == b"previous"
    case.corrupt(digest, data)
    case.store.get_file(digest, out / "blob.bin")
    assert (out / "blob.bin").read_bytes() == data
    assert [p.name for p in out.iterdir()] == ["blob.bin"]


def test_get_file_and_verify_of_a_missing_blob(case: StoreCase, tmp_path: Path) -> None:
    out = _dest_dir(tmp_path)
    digest = _sha(b"never stored")
    with pytest.raises(BlobNotFoundError):
        case.store.get_file(digest, out / "blob.bin")
    with pytest.raises(BlobNotFoundError):
        case.store.verify(digest)
    with pytest.raises(InvalidDigestError):
        case.store.get_file("abc", out / "blob.bin")
    assert list(out.iterdir()) == []


def test_get_file_write_failure_leaves_nothing(tmp_path: Path) -> None:
    """The destination hits the file size limit (EFBIG) half way through the copy."""
    case = _local_case(tmp_path)
    digest = case.store.put(_chunks(_payload(BIG), BIG_CHUNK))
    out = _dest_dir(tmp_path)
    with (
        _file_size_limit(2 * BIG_CHUNK),
        pytest.raises(OSError, match="too large") as info,
    ):
        case.store.get_file(digest, out / "blob.bin")
    assert info.value.errno == errno.EFBIG
    assert list(out.iterdir()) == []
