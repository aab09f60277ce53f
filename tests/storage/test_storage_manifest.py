"""Manifest identity: canonical lines, roots across sharding, header order, metadata."""

from __future__ import annotations

import gc
import hashlib
import io
import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from storage_helpers import random_tensors, split_file, write_raw, write_st

from storage import (
    InvalidSafetensorsError,
    Manifest,
    ManifestError,
    TensorEntry,
    manifest_of_file,
    manifest_of_files,
    manifest_of_path,
    manifest_of_stream,
    manifest_of_tensors,
)

DIGEST = "a" * 64


def test_line_and_root_are_exactly_the_documented_format() -> None:
    entries = (
        TensorEntry("b", "BF16", (2, 3), "b" * 64),
        TensorEntry("a", "F32", (), DIGEST),
    )
    manifest = Manifest(entries)
    expected = f"a\tF32\t\t{DIGEST}\nb\tBF16\t2,3\t{'b' * 64}\n".encode()
    assert manifest.canonical_bytes() == expected
    assert manifest.root == hashlib.sha256(expected).hexdigest()
    assert [e.name for e in manifest] == ["a", "b"]
    assert len(manifest) == 2
    assert manifest.param_count == 7
    assert manifest.by_name()["b"].numel == 6


def test_digests_are_sha256_of_stored_bytes(tmp_path: Path) -> None:
    tensors = random_tensors(seed=1, count=8)
    manifest = manifest_of_file(write_st(tmp_path / "m.safetensors", tensors))
    for name, arr in tensors.items():
        entry = manifest.by_name()[name]
        assert entry.digest == hashlib.sha256(arr.tobytes()).hexdigest()
        assert entry.shape == arr.shape


def test_sharded_directory_has_the_same_root_as_one_file(tmp_path: Path) -> None:
    tensors = random_tensors(seed=2, count=9)
    names = sorted(tensors)
    single = write_st(tmp_path / "one.safetensors", tensors)
    shards = tmp_path / "sharded"
    shards.mkdir()
    write_st(shards / "model-00001-of-00002.safetensors", {n: tensors[n] for n in names[::2]})
    write_st(shards / "model-00002-of-00002.safetensors", {n: tensors[n] for n in names[1::2]})
    (shards / "config.json").write_text("{}")
    assert manifest_of_path(shards).root == manifest_of_file(single).root
    assert manifest_of_path(shards) == manifest_of_path(single)


def test_one_bit_in_any_tensor_changes_the_root(tmp_path: Path) -> None:
    path = write_st(tmp_path / "m.safetensors", random_tensors(seed=3, count=6))
    base = manifest_of_file(path)
    header, data = split_file(path)
    prefix_len = path.stat().st_size - len(data)
    blob = path.read_bytes()
    for spec in header.values():
        if not isinstance(spec, dict) or "data_offsets" not in spec:
            continue
        begin, end = spec["data_offsets"]
        if begin == end:
            continue
        for pos in {begin, (begin + end) // 2, end - 1}:
            flipped = bytearray(blob)
            flipped[prefix_len + pos] ^= 1 << (pos % 8)
            path.write_bytes(flipped)
            assert manifest_of_file(path).root != base.root
    path.write_bytes(blob)
    assert manifest_of_file(path).root == base.root


def test_header_order_padding_and_metadata_do_not_change_the_root(tmp_path: Path) -> None:
    path = write_st(tmp_path / "m.safetensors", random_tensors(seed=4, count=6), {"a": "1"})
    header, data = split_file(path)
    reordered = dict(reversed(list(header.items())))
    reordered["__metadata__"] = {"other": "metadata"}
    raw = json.dumps(reordered, indent=1).encode() + b"   "
    other = write_raw(tmp_path / "r.safetensors", raw, data)
    assert other.read_bytes() != path.read_bytes()
    assert manifest_of_file(other).root == manifest_of_file(path).root


def test_duplicate_tensor_across_shards_is_an_error(tmp_path: Path) -> None:
    arr = np.zeros(3, dtype=np.float32)
    a = write_st(tmp_path / "a.safetensors", {"x": arr, "y": arr})
    b = write_st(tmp_path / "b.safetensors", {"x": arr})
    with pytest.raises(ManifestError, match="'x'.*a.safetensors.*b.safetensors"):
        manifest_of_files([a, b])


def test_directory_without_safetensors_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="no \\*.safetensors"):
        manifest_of_path(tmp_path)


def test_in_memory_tensors_give_the_file_root(tmp_path: Path) -> None:
    tensors = random_tensors(seed=5, count=7)
    path = write_st(tmp_path / "m.safetensors", tensors)
    header, _ = split_file(path)
    items = [
        (name, str(header[name]["dtype"]), arr.shape, arr)  # type: ignore[index]
        for name, arr in tensors.items()
    ]
    assert manifest_of_tensors(items).root == manifest_of_file(path).root


def test_in_memory_size_mismatch_and_unknown_dtype_are_errors() -> None:
    with pytest.raises(ManifestError, match="needs 12 bytes"):
        manifest_of_tensors([("w", "F32", (3,), b"\0" * 8)])
    with pytest.raises(ManifestError, match="unknown dtype"):
        manifest_of_tensors([("w", "F3", (3,), b"\0" * 12)])
    with pytest.raises(ManifestError, match="duplicate"):
        manifest_of_tensors([("w", "U8", (1,), b"\0"), ("w", "U8", (1,), b"\1")])


def test_json_round_trip_and_checks() -> None:
    manifest = Manifest((TensorEntry("w", "F16", (4, 2), DIGEST),))
    obj = json.loads(json.dumps(manifest.to_json()))
    assert Manifest.from_json(obj) == manifest
    assert Manifest.from_json({"tensors": obj["tensors"]}).root == manifest.root
    with pytest.raises(ManifestError, match="stated root"):
        Manifest.from_json({**obj, "root": "0" * 64})


@pytest.mark.parametrize(
    "bad",
    [
        None,
        [],
        {"tensors": "x"},
        {"tensors": [{"name": "w", "dtype": "F16", "shape": [1]}]},
        {"tensors": [{"name": "w", "dtype": "F99", "shape": [1], "digest": DIGEST}]},
        {"tensors": [{"name": "w", "dtype": "F16", "shape": [-1], "digest": DIGEST}]},
        {"tensors": [{"name": "w", "dtype": "F16", "shape": [True], "digest": DIGEST}]},
        {"tensors": [{"name": "w", "dtype": "F16", "shape": [1], "digest": "A" * 64}]},
        {"tensors": [{"name": "a\tb", "dtype": "F16", "shape": [1], "digest": DIGEST}]},
        {"tensors": [{"name": "w", "dtype": "F16", "shape": [1], "digest": DIGEST}] * 2},
    ],
)
def test_bad_manifest_json_is_a_manifest_error(bad: object) -> None:
    with pytest.raises(ManifestError):
        Manifest.from_json(bad)


def test_stream_with_odd_chunk_sizes_matches_file(tmp_path: Path) -> None:
    path = write_st(tmp_path / "m.safetensors", random_tensors(seed=6, count=12))
    expected = manifest_of_file(path)
    blob = path.read_bytes()
    for chunk_size in (1, 3, 7, 64, 1000):
        got = manifest_of_stream(io.BytesIO(blob), len(blob), chunk_size=chunk_size)
        assert got == expected


def test_stream_length_must_match_its_size(tmp_path: Path) -> None:
    blob = write_st(tmp_path / "m.safetensors", random_tensors(seed=7)).read_bytes()
    with pytest.raises(InvalidSafetensorsError, match="truncated"):
        manifest_of_stream(io.BytesIO(blob[:-1]), len(blob), label="blob:x")
    with pytest.raises(InvalidSafetensorsError, match="longer"):
        manifest_of_stream(io.BytesIO(blob + b"\0"), len(blob))


def test_memory_stays_bounded_by_one_chunk_on_one_thread(tmp_path: Path) -> None:
    big = np.zeros(48 * 1024 * 1024 // 4, dtype=np.float32)
    path = write_st(tmp_path / "big.safetensors", {"big": big, "small": big[:10]})
    del big
    gc.collect()  # garbage of earlier tests (moto runs in-process) is not ours to count
    tracemalloc.start()
    try:
        manifest_of_file(path, chunk_size=4 * 1024 * 1024, workers=1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024
