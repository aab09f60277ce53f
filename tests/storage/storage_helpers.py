"""Writers of safetensors files for the storage tests: via the library, and byte by byte."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

NUMPY_DTYPES: dict[str, type[np.generic]] = {
    "BOOL": np.bool_,
    "U8": np.uint8,
    "I8": np.int8,
    "I16": np.int16,
    "U16": np.uint16,
    "F16": np.float16,
    "I32": np.int32,
    "U32": np.uint32,
    "F32": np.float32,
    "F64": np.float64,
    "I64": np.int64,
    "U64": np.uint64,
}


def random_tensors(seed: int, count: int = 5) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    names = list(NUMPY_DTYPES)
    out: dict[str, np.ndarray] = {}
    for i in range(count):
        dtype = NUMPY_DTYPES[names[i % len(names)]]
        shape = tuple(int(d) for d in rng.integers(0, 6, size=i % 4))
        raw = rng.integers(0, 256, size=int(np.prod(shape)) * np.dtype(dtype).itemsize)
        out[f"layer.{i}.weight"] = np.frombuffer(raw.astype(np.uint8).tobytes(), dtype).reshape(
            shape
        )
    return out


def write_st(
    path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None
) -> Path:
    save_file(tensors, str(path), metadata=metadata)
    return path


def write_raw(path: Path, header: object, data: bytes, header_len: int | None = None) -> Path:
    """Write a file with any header object (or raw header bytes) and data section."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode("utf-8")
    n = len(raw) if header_len is None else header_len
    path.write_bytes(struct.pack("<Q", n) + raw + data)
    return path


def split_file(path: Path) -> tuple[dict[str, object], bytes]:
    """The parsed header (key order kept) and the data section of a safetensors file."""
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8 : 8 + n]), blob[8 + n :]
