"""Parallel manifest hashing: the same digests as the sequential stream path, bit for bit,
for any tensors, shard split, unit size and thread count; bounded memory; clean failures."""

from __future__ import annotations

import gc
import hashlib
import os
import tempfile
import threading
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import write_raw, write_st

from storage import (
    DTYPE_SIZES,
    InvalidSafetensorsError,
    Manifest,
    manifest_of_file,
    manifest_of_files,
    manifest_of_path,
    manifest_of_stream,
    read_header,
)
from storage.parallel import MAX_DEFAULT_WORKERS, _items, _Schedule, default_workers, hash_files

MIB = 1024 * 1024
DTYPES = ["U8", "F16", "F32", "F64"]


@st.composite
def tensor_sets(draw: st.DrawFn) -> list[tuple[str, str, list[int], bytes]]:
    """Tensors with random names, dtypes and sizes (empty ones too), some far larger than
    the unit size the test hashes with, so that one tensor spans many work units."""
    names = draw(st.lists(st.from_regex(r"[a-z][a-z0-9._]{0,8}", fullmatch=True), max_size=8))
    out = []
    for name in dict.fromkeys(names):
        dtype = draw(st.sampled_from(DTYPES))
        numel = draw(st.one_of(st.integers(0, 8), st.integers(9, 3000)))
        data = draw(st.binary(min_size=1, max_size=64)) * (numel * DTYPE_SIZES[dtype])
        out.append((name, dtype, [numel], data[: numel * DTYPE_SIZES[dtype]]))
    return out


def write_tensors(path: Path, tensors: list[tuple[str, str, list[int], bytes]]) -> Path:
    """A safetensors file holding `tensors` in this data order (header keys shuffled)."""
    header: dict[str, object] = {}
    offset = 0
    for name, dtype, shape, data in tensors:
        header[name] = {
            "dtype": dtype,
            "shape": shape,
            "data_offsets": [offset, offset + len(data)],
        }
        offset += len(data)
    shuffled = dict(reversed(list(header.items())))
    return write_raw(path, shuffled, b"".join(data for *_, data in tensors))


def sequential_manifest(paths: list[Path]) -> Manifest:
    """The reference: each file read once, front to back, by `manifest_of_stream`."""
    entries = []
    for path in paths:
        with open(path, "rb") as fh:
            entries += list(manifest_of_stream(fh, path.stat().st_size, str(path)))
    return Manifest(tuple(entries))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tensors=tensor_sets(),
    data=st.data(),
    chunk_size=st.sampled_from([1, 7, 64, 1000, 8192]),
    workers=st.integers(1, 4),
)
def test_parallel_roots_equal_the_sequential_path(
    tensors: list[tuple[str, str, list[int], bytes]],
    data: st.DataObject,
    chunk_size: int,
    workers: int,
) -> None:
    shard_of = [data.draw(st.integers(0, 2)) for _ in tensors]
    with tempfile.TemporaryDirectory() as tmp:
        paths = [
            write_tensors(Path(tmp) / f"model-{shard}.safetensors", part)
            for shard in sorted(set(shard_of))
            if (part := [t for t, s in zip(tensors, shard_of, strict=True) if s == shard])
        ]
        got = manifest_of_files(paths, chunk_size=chunk_size, workers=workers)
        assert got == sequential_manifest(paths)
    assert {e.name: e.digest for e in got} == {
        name: hashlib.sha256(raw).hexdigest() for name, _, _, raw in tensors
    }


@pytest.mark.parametrize("workers", [1, 2, 3, 8])
def test_one_huge_tensor_among_small_ones(tmp_path: Path, workers: int) -> None:
    rng = np.random.default_rng(0)
    tensors = {f"small.{i}": rng.standard_normal(100 + i).astype(np.float32) for i in range(40)}
    tensors["embed"] = rng.standard_normal((512, 1024)).astype(np.float32)  # 2 MiB
    path = write_st(tmp_path / "m.safetensors", tensors)
    got = manifest_of_file(path, chunk_size=64 * 1024, workers=workers)
    assert got == sequential_manifest([path])
    assert got.by_name()["embed"].digest == hashlib.sha256(tensors["embed"].tobytes()).hexdigest()


def _schedule_of(path: Path, chunk_size: int) -> _Schedule:
    header = read_header(path)
    hashers = [hashlib.sha256() for _ in header.tensors]
    return _Schedule(_items(0, header, hashers, chunk_size), chunk_size)


def test_schedule_starts_the_largest_item_first_then_helps_it(tmp_path: Path) -> None:
    tensors = [("big", "U8", [100], b"b" * 100)]
    tensors += [(f"s{i}", "U8", [5], b"s" * 5) for i in range(4)]
    schedule = _schedule_of(write_tensors(tmp_path / "m.safetensors", tensors), chunk_size=10)
    first = schedule.claim(None)
    assert first is not None
    big, start, end = first
    assert (end - start, big.end - big.begin) == (10, 100)  # worker A: the big tensor
    second = schedule.claim(None)
    assert second is not None
    assert second[0] is not big  # worker B: the small ones (10 bytes)
    schedule.done(second[0], second[2])
    third = schedule.claim(second[0])
    assert third is not None
    assert third[0] is not big  # B: the last 10 bytes of small ones
    schedule.done(third[0], third[2])
    helped = schedule.claim(third[0])
    assert helped is not None  # nothing else left: B reads the big tensor's next unit ahead
    assert helped == (big, big.begin + 10, big.begin + 20)
    assert schedule.claim(big) == (big, big.begin + 20, big.begin + 30)  # A continues after it


def test_units_of_an_item_are_handed_out_once_in_order(tmp_path: Path) -> None:
    tensors = [("a", "U8", [25], b"a" * 25), ("b", "U8", [3], b"b" * 3)]
    schedule = _schedule_of(write_tensors(tmp_path / "m.safetensors", tensors), chunk_size=10)
    units = []
    while (unit := schedule.claim(None)) is not None:
        units.append((unit[0].begin, unit[1], unit[2]))
    data_start = units[0][0]
    spans = sorted((s - data_start, e - data_start) for _, s, e in units)
    assert spans == [(0, 10), (10, 20), (20, 25), (25, 28)]


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_memory_is_bounded_by_one_buffer_per_worker(tmp_path: Path, workers: int) -> None:
    big = np.zeros(48 * MIB // 4, dtype=np.float32)
    path = write_st(tmp_path / "big.safetensors", {"big": big, "small": big[:10]})
    del big
    chunk = 2 * MIB
    gc.collect()  # garbage of earlier tests (moto runs in-process) is not ours to count
    tracemalloc.start()
    try:
        manifest_of_file(path, chunk_size=chunk, workers=workers)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < workers * chunk + 512 * 1024


@pytest.mark.parametrize("workers", [1, 3])
def test_a_file_truncated_while_hashing_is_an_error_and_every_thread_stops(
    tmp_path: Path, workers: int
) -> None:
    tensors = [(f"t{i}", "U8", [5000], bytes([i]) * 5000) for i in range(6)]
    path = write_tensors(tmp_path / "m.safetensors", tensors)
    header = read_header(path)
    before = threading.active_count()
    with open(path, "r+b") as fh:
        os.ftruncate(fh.fileno(), path.stat().st_size - 7000)  # after the header was read
        with pytest.raises(InvalidSafetensorsError, match="truncated at data byte"):
            hash_files([(fh.fileno(), header)], chunk_size=1000, workers=workers)
    assert threading.active_count() == before


def test_workers_and_chunk_size_must_be_positive(tmp_path: Path) -> None:
    path = write_tensors(tmp_path / "m.safetensors", [("a", "U8", [3], b"abc")])
    with pytest.raises(ValueError, match="workers"):
        manifest_of_file(path, workers=0)
    with pytest.raises(ValueError, match="chunk_size"):
        manifest_of_file(path, chunk_size=0)


def test_only_empty_tensors(tmp_path: Path) -> None:
    path = write_tensors(
        tmp_path / "m.safetensors", [("a", "F32", [0], b""), ("b", "U8", [0], b"")]
    )
    empty = hashlib.sha256(b"").hexdigest()
    assert [e.digest for e in manifest_of_file(path, workers=2)] == [empty, empty]


def test_a_sharded_directory_on_any_number_of_threads(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    tensors = {f"w{i}": rng.standard_normal((64, 300 + i)).astype(np.float32) for i in range(9)}
    names = sorted(tensors)
    for shard in range(3):
        part = {n: tensors[n] for n in names[shard::3]}
        write_st(tmp_path / f"model-{shard:05d}-of-00003.safetensors", part)
    one = manifest_of_path(tmp_path, workers=1)
    assert manifest_of_path(tmp_path, workers=2) == one
    assert manifest_of_path(tmp_path, workers=5) == one
    assert one == sequential_manifest(sorted(tmp_path.glob("*.safetensors")))


def test_default_workers_are_the_usable_cores_capped() -> None:
    assert 1 <= default_workers() <= MAX_DEFAULT_WORKERS
    assert default_workers() <= (os.cpu_count() or 1)
