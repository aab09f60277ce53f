"""Header validation: every malformed file is an InvalidSafetensorsError naming the file."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from storage_helpers import write_raw, write_st

from storage import InvalidSafetensorsError, manifest_of_file, read_header

F32 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


def test_read_header_reports_tensors_in_data_order_and_metadata(tmp_path: Path) -> None:
    arr = np.arange(3, dtype=np.int16)
    path = write_st(tmp_path / "m.safetensors", {"z": arr, "a": arr[:1]}, {"fmt": "pt"})
    header = read_header(path)
    assert header.metadata == {"fmt": "pt"}
    assert sorted((t.name, t.dtype, t.shape, t.nbytes) for t in header.tensors) == [
        ("a", "I16", (1,), 2),
        ("z", "I16", (3,), 6),
    ]
    assert [t.begin for t in header.tensors] == sorted(t.begin for t in header.tensors)
    assert header.data_start + header.data_size == path.stat().st_size
    assert header.tensors[0].begin == 0


CASES: list[tuple[str, bytes | dict[str, object], bytes, str]] = [
    ("empty file", b"", b"", "too short"),
    ("bad utf8", b"{\xff}", b"", "UTF-8"),
    ("not json", b"{nope", b"", "not valid JSON"),
    ("json list", b"[1, 2]", b"", "not a JSON object"),
    ("nan", b'{"x": NaN}', b"", "not valid JSON"),
    ("duplicate key", b'{"x": {}, "x": {}}', b"", "not valid JSON"),
    ("deep nesting", b"{" + b'"a":[' * 100000, b"", "not valid JSON"),
    ("spec not object", {"x": 1}, b"", "exactly dtype"),
    ("extra key", {"x": {**F32, "extra": 1}}, b"\0" * 8, "exactly dtype"),
    ("unknown dtype", {"x": {**F32, "dtype": "F31"}}, b"\0" * 8, "unknown dtype"),
    ("sub-byte dtype", {"x": {**F32, "dtype": "F4"}}, b"\0" * 8, "unknown dtype"),
    ("negative dim", {"x": {**F32, "shape": [-2]}}, b"\0" * 8, "shape"),
    ("bool dim", {"x": {**F32, "shape": [True, 2]}}, b"\0" * 8, "shape"),
    ("float dim", {"x": {**F32, "shape": [2.0]}}, b"\0" * 8, "shape"),
    ("three offsets", {"x": {**F32, "data_offsets": [0, 4, 8]}}, b"\0" * 8, "data_offsets"),
    ("reversed offsets", {"x": {**F32, "data_offsets": [8, 0]}}, b"\0" * 8, "outside"),
    ("offset past end", {"x": {**F32, "data_offsets": [0, 16]}}, b"\0" * 8, "outside"),
    ("shape mismatch", {"x": {**F32, "shape": [3]}}, b"\0" * 8, "needs 12 bytes"),
    ("gap at start", {"x": {**F32, "data_offsets": [4, 12]}}, b"\0" * 12, "gap"),
    (
        "overlap",
        {"x": F32, "y": {**F32, "data_offsets": [4, 12]}},
        b"\0" * 12,
        "overlaps",
    ),
    (
        "gap between",
        {"x": F32, "y": {**F32, "data_offsets": [12, 20]}},
        b"\0" * 20,
        "gap",
    ),
    ("trailing bytes", {"x": F32}, b"\0" * 9, "after the last tensor"),
    ("metadata not strings", {"__metadata__": {"a": 1}}, b"", "__metadata__"),
    ("metadata list", {"__metadata__": ["a"]}, b"", "__metadata__"),
    ("tab in name", {"a\tb": F32}, b"\0" * 8, "bad tensor name"),
    ("newline in name", {"a\nb": F32}, b"\0" * 8, "bad tensor name"),
    ("empty name", {"": F32}, b"\0" * 8, "bad tensor name"),
    (
        "surrogate name",
        b'{"\\ud800": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}}',
        b"",
        "not valid UTF-8",
    ),
]


@pytest.mark.parametrize(
    ("header", "data", "problem"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_invalid_files_are_rejected(
    tmp_path: Path, header: bytes | dict[str, object], data: bytes, problem: str
) -> None:
    path = tmp_path / "bad.safetensors"
    if header == b"":
        path.write_bytes(b"")
    else:
        write_raw(path, header, data)
    with pytest.raises(InvalidSafetensorsError, match=problem) as info:
        manifest_of_file(path)
    assert info.value.path == str(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("header_len", "problem"),
    [(2**63, "exceeds the limit"), (10**9, "exceeds the limit"), (200, "exceeds the file")],
)
def test_header_length_is_bounded(tmp_path: Path, header_len: int, problem: str) -> None:
    path = write_raw(tmp_path / "bad.safetensors", {"x": F32}, b"\0" * 8, header_len)
    with pytest.raises(InvalidSafetensorsError, match=problem):
        read_header(path)


def test_null_metadata_and_empty_tensors_are_valid(tmp_path: Path) -> None:
    header = {
        "__metadata__": None,
        "e": {"dtype": "BF16", "shape": [0, 4], "data_offsets": [0, 0]},
        "x": F32,
        "s": {"dtype": "U8", "shape": [], "data_offsets": [8, 9]},
    }
    path = write_raw(tmp_path / "ok.safetensors", json.dumps(header).encode(), b"\1" * 9)
    manifest = manifest_of_file(path)
    assert [e.name for e in manifest] == ["e", "s", "x"]
    assert manifest.by_name()["s"].line().split("\t")[2] == ""


def test_length_prefix_is_little_endian_u64(tmp_path: Path) -> None:
    raw = json.dumps({"x": F32}).encode()
    path = tmp_path / "be.safetensors"
    path.write_bytes(struct.pack(">Q", len(raw)) + raw + b"\0" * 8)
    with pytest.raises(InvalidSafetensorsError):
        read_header(path)
