"""The safetensors header: read, bounded and validated before any byte of data is trusted.

Layout: 8-byte little-endian header length N, N bytes of UTF-8 JSON, then the data section.
The JSON maps tensor names to `{"dtype", "shape", "data_offsets": [begin, end]}` (offsets
relative to the data section) plus an optional `"__metadata__"` object of string -> string.
A valid header describes the data section exactly: every tensor's byte span is
`numel * itemsize`, spans lie inside the section, and sorted by offset they tile it with no
overlap and no gap.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
from dataclasses import dataclass, field
from typing import BinaryIO

from storage.errors import InvalidSafetensorsError

DTYPE_SIZES: dict[str, int] = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "F8_E8M0": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "C64": 8,
    "F64": 8,
    "I64": 8,
    "U64": 8,
}
"""Bytes per element of each safetensors dtype string (sub-byte dtypes are not accepted)."""

MAX_HEADER_SIZE = 100_000_000
"""Largest accepted JSON header, in bytes (the bound the safetensors library uses)."""

METADATA_KEY = "__metadata__"
_TENSOR_KEYS = frozenset({"dtype", "shape", "data_offsets"})
_BAD_NAME_RE = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a header; `begin`/`end` are offsets into the data section."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


@dataclass(frozen=True)
class Header:
    """A validated header. `tensors` are in data order (sorted by offset)."""

    path: str
    header_size: int
    data_size: int
    tensors: tuple[TensorInfo, ...]
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def data_start(self) -> int:
        """Absolute file offset of the data section."""
        return 8 + self.header_size


def read_header(path: str | os.PathLike[str]) -> Header:
    """Read and validate the header of a safetensors file."""
    with open(path, "rb") as fh:
        return read_header_from(fh, os.fstat(fh.fileno()).st_size, os.fspath(path))


def read_header_from(fh: BinaryIO, size: int, label: str) -> Header:
    """Read the header from `fh` (positioned at the start of a `size`-byte file)."""
    if size < 8:
        raise InvalidSafetensorsError(label, f"too short for a header ({size} bytes)")
    (header_size,) = struct.unpack("<Q", _read_exact(fh, 8, label))
    if header_size > MAX_HEADER_SIZE:
        raise InvalidSafetensorsError(label, f"header length {header_size} exceeds the limit")
    if header_size > size - 8:
        raise InvalidSafetensorsError(
            label, f"header length {header_size} exceeds the file ({size} bytes)"
        )
    raw = _read_exact(fh, header_size, label)
    data_size = size - 8 - header_size
    tensors, metadata = parse_header(raw, data_size, label)
    return Header(label, header_size, data_size, tensors, metadata)


def parse_header(
    raw: bytes, data_size: int, label: str
) -> tuple[tuple[TensorInfo, ...], dict[str, str]]:
    """Validate header JSON against a data section of `data_size` bytes."""
    obj = _load_json(raw, label)
    metadata = _check_metadata(obj.pop(METADATA_KEY, None), label)
    tensors = [_check_tensor(name, spec, data_size, label) for name, spec in obj.items()]
    tensors.sort(key=lambda t: (t.begin, t.end))
    _check_tiling(tensors, data_size, label)
    return tuple(tensors), metadata


def _read_exact(fh: BinaryIO, n: int, label: str) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise InvalidSafetensorsError(label, f"truncated: wanted {n} bytes, got {len(data)}")
    return data


def _load_json(raw: bytes, label: str) -> dict[str, object]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidSafetensorsError(label, "header is not valid UTF-8") from None
    if not text.startswith("{"):
        raise InvalidSafetensorsError(label, "header is not a JSON object")
    try:
        obj = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise InvalidSafetensorsError(label, f"header is not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise InvalidSafetensorsError(label, "header is not a JSON object")
    return obj


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise ValueError("duplicate key in object")
    return obj


def _no_constant(name: str) -> object:
    raise ValueError(f"non-standard constant {name}")


def _check_metadata(value: object, label: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InvalidSafetensorsError(label, f"{METADATA_KEY} must map strings to strings")
    return dict(value)


def _check_tensor(name: str, spec: object, data_size: int, label: str) -> TensorInfo:
    def bad(problem: str) -> InvalidSafetensorsError:
        return InvalidSafetensorsError(label, f"tensor {name!r}: {problem}")

    check_tensor_name(name, label)
    if not isinstance(spec, dict) or set(spec) != _TENSOR_KEYS:
        raise bad("must be an object with exactly dtype, shape and data_offsets")
    dtype, shape, offsets = spec["dtype"], spec["shape"], spec["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_SIZES:
        raise bad(f"unknown dtype {dtype!r}")
    if not _is_int_list(shape):
        raise bad(f"shape must be a list of non-negative integers, got {shape!r}")
    if not _is_int_list(offsets) or len(offsets) != 2:
        raise bad(f"data_offsets must be two non-negative integers, got {offsets!r}")
    begin, end = offsets
    if not begin <= end <= data_size:
        raise bad(f"data_offsets [{begin}, {end}] outside the data section ({data_size} bytes)")
    nbytes = math.prod(shape) * DTYPE_SIZES[dtype]
    if nbytes != end - begin:
        raise bad(f"shape {shape} of {dtype} needs {nbytes} bytes, span holds {end - begin}")
    return TensorInfo(name, dtype, tuple(shape), begin, end)


def check_tensor_name(name: str, label: str) -> None:
    """A tensor name must be non-empty UTF-8 without control characters (tab, newline...)."""
    if not name or _BAD_NAME_RE.search(name):
        raise InvalidSafetensorsError(label, f"bad tensor name {name!r}")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidSafetensorsError(label, f"tensor name {name!r} is not valid UTF-8") from None


def _is_int_list(value: object) -> bool:
    return isinstance(value, list) and all(type(x) is int and x >= 0 for x in value)


def _check_tiling(tensors: list[TensorInfo], data_size: int, label: str) -> None:
    cursor, previous = 0, "start of data"
    for t in tensors:
        if t.begin < cursor:
            raise InvalidSafetensorsError(label, f"tensor {t.name!r} overlaps {previous!r}")
        if t.begin > cursor:
            raise InvalidSafetensorsError(label, f"gap before tensor {t.name!r} at {cursor}")
        cursor, previous = t.end, t.name
    if cursor != data_size:
        raise InvalidSafetensorsError(
            label, f"{data_size - cursor} bytes after the last tensor are not described"
        )
