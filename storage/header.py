"""The safetensors header: read, bounded and validated before any byte of data is trusted.

Layout: 8-byte little-endian header length N, N bytes of UTF-8 JSON, then the data section.
The JSON maps tensor names to `{"dtype", "shape", "data_offsets": [begin, end]}` (offsets
relative to the data section) plus an optional `"__metadata__"` object of string -> string.
A valid header describes the data section exactly: every tensor's byte span is
`numel * itemsize`, spans lie inside the section, and sorted by offset they tile it with no
overlap and no gap.

`HeaderLimits` bounds what a header may make the reader allocate: the header's length is
checked against `max_header_bytes` before a byte of it is read, the tensor count while the
JSON is parsed (each tensor's object is counted as the parser builds it), and dims and
elements per tensor before any size is computed from them. The defaults are the
safetensors library's (a 100 MB header, nothing else bounded), for backbones; callers that
read adapters pass adapter-sized limits. A header over a limit is `HeaderLimitError`.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

from storage.errors import HeaderLimitError, InvalidSafetensorsError

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


@dataclass(frozen=True)
class HeaderLimits:
    """Bounds on one header; ``None`` leaves that quantity unbounded."""

    max_header_bytes: int = MAX_HEADER_SIZE
    max_tensors: int | None = None
    max_dims: int | None = None
    max_elements: int | None = None


DEFAULT_LIMITS = HeaderLimits()

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


def read_header(path: str | os.PathLike[str], limits: HeaderLimits = DEFAULT_LIMITS) -> Header:
    """Read and validate the header of a safetensors file."""
    with open(path, "rb") as fh:
        return read_header_from(fh, os.fstat(fh.fileno()).st_size, os.fspath(path), limits)


def read_header_from(
    fh: BinaryIO, size: int, label: str, limits: HeaderLimits = DEFAULT_LIMITS
) -> Header:
    """Read the header from `fh` (positioned at the start of a `size`-byte file)."""
    if size < 8:
        raise InvalidSafetensorsError(label, f"too short for a header ({size} bytes)")
    (header_size,) = struct.unpack("<Q", _read_exact(fh, 8, label))
    if header_size > limits.max_header_bytes:
        raise HeaderLimitError(
            label,
            "max_header_bytes",
            limits.max_header_bytes,
            f"header length {header_size} bytes exceeds the limit",
        )
    if header_size > size - 8:
        raise InvalidSafetensorsError(
            label, f"header length {header_size} exceeds the file ({size} bytes)"
        )
    raw = _read_exact(fh, header_size, label)
    data_size = size - 8 - header_size
    tensors, metadata = parse_header(raw, data_size, label, limits)
    return Header(label, header_size, data_size, tensors, metadata)


def parse_header(
    raw: bytes, data_size: int, label: str, limits: HeaderLimits = DEFAULT_LIMITS
) -> tuple[tuple[TensorInfo, ...], dict[str, str]]:
    """Validate header JSON against a data section of `data_size` bytes."""
    obj = _load_json(raw, label, limits.max_tensors)
    metadata = _check_metadata(obj.pop(METADATA_KEY, None), label)
    if limits.max_tensors is not None and len(obj) > limits.max_tensors:
        raise HeaderLimitError(
            label, "max_tensors", limits.max_tensors, f"header lists {len(obj)} tensors"
        )
    tensors = [_check_tensor(name, spec, data_size, label, limits) for name, spec in obj.items()]
    tensors.sort(key=lambda t: (t.begin, t.end))
    _check_tiling(tensors, data_size, label)
    return tuple(tensors), metadata


def _read_exact(fh: BinaryIO, n: int, label: str) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise InvalidSafetensorsError(label, f"truncated: wanted {n} bytes, got {len(data)}")
    return data


def _load_json(raw: bytes, label: str, max_tensors: int | None = None) -> dict[str, object]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidSafetensorsError(label, "header is not valid UTF-8") from None
    if not text.startswith("{"):
        raise InvalidSafetensorsError(label, "header is not a JSON object")
    hook = _no_duplicates if max_tensors is None else _counting(max_tensors, label)
    try:
        obj = json.loads(text, object_pairs_hook=hook, parse_constant=_no_constant)
    except HeaderLimitError:
        raise
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


def _counting(
    max_tensors: int, label: str
) -> Callable[[list[tuple[str, object]]], dict[str, object]]:
    """`_no_duplicates` that refuses the header once it has built more objects than
    `max_tensors` tensors, the metadata and the header itself can need."""
    built = 0

    def hook(pairs: list[tuple[str, object]]) -> dict[str, object]:
        nonlocal built
        built += 1
        if built > max_tensors + 2:
            raise HeaderLimitError(
                label, "max_tensors", max_tensors, f"header lists over {max_tensors} tensors"
            )
        return _no_duplicates(pairs)

    return hook


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


def _check_tensor(
    name: str, spec: object, data_size: int, label: str, limits: HeaderLimits
) -> TensorInfo:
    def bad(problem: str) -> InvalidSafetensorsError:
        return InvalidSafetensorsError(label, f"tensor {name!r}: {problem}")

    check_tensor_name(name, label)
    if not isinstance(spec, dict) or set(spec) != _TENSOR_KEYS:
        raise bad("must be an object with exactly dtype, shape and data_offsets")
    dtype, shape, offsets = spec["dtype"], spec["shape"], spec["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_SIZES:
        raise bad(f"unknown dtype {dtype!r}")
    if not isinstance(shape, list):
        raise bad(f"shape must be a list of non-negative integers, got {shape!r}")
    _check_shape_limits(name, shape, label, limits)
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


def _check_shape_limits(name: str, shape: list[object], label: str, limits: HeaderLimits) -> None:
    if limits.max_dims is not None and len(shape) > limits.max_dims:
        raise HeaderLimitError(
            label, "max_dims", limits.max_dims, f"tensor {name!r} has {len(shape)} dimensions"
        )
    if limits.max_elements is not None and _is_int_list(shape):
        elements = math.prod(shape)  # type: ignore[arg-type]
        if elements > limits.max_elements:
            raise HeaderLimitError(
                label,
                "max_elements",
                limits.max_elements,
                f"tensor {name!r} of shape {shape} has {elements} elements",
            )


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
