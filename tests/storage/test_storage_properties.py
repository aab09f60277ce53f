"""Property tests: agreement with the safetensors library, and corruption never escapes
as anything but InvalidSafetensorsError."""

from __future__ import annotations

import hashlib
import json
import struct
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import NUMPY_DTYPES, split_file, write_raw, write_st

from storage import (
    InvalidSafetensorsError,
    manifest_of_file,
    manifest_of_path,
    manifest_of_tensors,
)

NAMES = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12
).filter(lambda s: s != "__metadata__")
SHAPES = st.lists(st.integers(0, 5), max_size=3)


@st.composite
def tensor_dicts(draw: st.DrawFn) -> dict[str, np.ndarray]:
    names = draw(st.lists(NAMES, min_size=1, max_size=6, unique=True))
    out = {}
    for name in names:
        dtype = np.dtype(NUMPY_DTYPES[draw(st.sampled_from(sorted(NUMPY_DTYPES)))])
        shape = tuple(draw(SHAPES))
        raw = draw(
            st.binary(
                min_size=dtype.itemsize * int(np.prod(shape)),
                max_size=dtype.itemsize * int(np.prod(shape)),
            )
        )
        out[name] = np.frombuffer(raw, dtype=dtype).reshape(shape)
    return out


def _dtype_str(arr: np.ndarray) -> str:
    return next(k for k, v in NUMPY_DTYPES.items() if np.dtype(v) == arr.dtype)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensors=tensor_dicts())
def test_round_trip_against_the_safetensors_library(tensors: dict[str, np.ndarray]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = write_st(Path(tmp) / "m.safetensors", tensors)
        manifest = manifest_of_file(path)
    assert sorted(e.name for e in manifest) == sorted(tensors)
    for entry in manifest:
        arr = tensors[entry.name]
        assert entry.dtype == _dtype_str(arr)
        assert entry.shape == arr.shape
        assert entry.digest == hashlib.sha256(arr.tobytes()).hexdigest()
    items = [(n, _dtype_str(a), a.shape, a.tobytes()) for n, a in tensors.items()]
    assert manifest_of_tensors(items).root == manifest.root


def _valid_file(tmp: str) -> Path:
    rng = np.random.default_rng(0)
    tensors = {
        "a": rng.standard_normal((3, 4)).astype(np.float32),
        "b": np.arange(5, dtype=np.int64),
        "c": np.array(1.5, dtype=np.float16),
    }
    return write_st(Path(tmp) / "m.safetensors", tensors, {"k": "v"})


def _parses_or_is_invalid(path: Path) -> None:
    error: InvalidSafetensorsError | None = None
    try:
        manifest_of_file(path)
    except InvalidSafetensorsError as exc:
        error = exc
    assert error is None or error.path == str(path)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_random_header_byte_corruption_is_always_invalid_safetensors(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = _valid_file(tmp)
        blob = bytearray(path.read_bytes())
        (n,) = struct.unpack("<Q", blob[:8])
        for _ in range(data.draw(st.integers(1, 4))):
            pos = data.draw(st.integers(0, 8 + n - 1))
            blob[pos] = data.draw(st.integers(0, 255))
        if data.draw(st.booleans()):
            del blob[data.draw(st.integers(0, len(blob))) :]
        path.write_bytes(blob)
        _parses_or_is_invalid(path)


OFFSET = st.one_of(
    st.integers(-(2**70), 2**70),
    st.integers(0, 200),
    st.floats(),
    st.text(max_size=3),
    st.none(),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_random_offsets_and_shapes_are_always_invalid_safetensors(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = _valid_file(tmp)
        header, body = split_file(path)
        name = data.draw(st.sampled_from(["a", "b", "c"]))
        field = data.draw(st.sampled_from(["data_offsets", "shape"]))
        spec = header[name]
        assert isinstance(spec, dict)
        spec[field] = data.draw(st.one_of(st.lists(OFFSET, max_size=3), OFFSET))
        write_raw(path, json.dumps(header).encode(), body)
        _parses_or_is_invalid(path)


@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=64), size_delta=st.integers(-8, 8))
def test_arbitrary_bytes_are_invalid_safetensors(raw: bytes, size_delta: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.safetensors"
        path.write_bytes(struct.pack("<Q", max(0, len(raw) + size_delta)) + raw)
        _parses_or_is_invalid(path)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensors=tensor_dicts(), data=st.data())
def test_any_sharding_has_the_root_of_one_file(
    tensors: dict[str, np.ndarray], data: st.DataObject
) -> None:
    shard_of = {name: data.draw(st.integers(0, 2)) for name in tensors}
    with tempfile.TemporaryDirectory() as tmp:
        single = manifest_of_file(write_st(Path(tmp) / "one.safetensors", tensors))
        shards = Path(tmp) / "shards"
        shards.mkdir()
        for shard in set(shard_of.values()):
            part = {n: a for n, a in tensors.items() if shard_of[n] == shard}
            write_st(shards / f"model-{shard}.safetensors", part)
        assert manifest_of_path(shards).root == single.root


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensors=tensor_dicts(), data=st.data())
def test_flipping_any_data_bit_changes_the_root(
    tensors: dict[str, np.ndarray], data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = write_st(Path(tmp) / "m.safetensors", tensors)
        root = manifest_of_file(path).root
        _, body = split_file(path)
        if not body:
            return
        blob = bytearray(path.read_bytes())
        bit = data.draw(st.integers(0, len(body) * 8 - 1))
        blob[len(blob) - len(body) + bit // 8] ^= 1 << (bit % 8)
        path.write_bytes(blob)
        assert manifest_of_file(path).root != root
