"""Manifests: the canonical identity of a set of tensors, independent of file layout.

- tensor digest = sha256 (hex) of the tensor's stored data bytes;
- manifest line = ``name \\t dtype \\t shape \\t digest \\n`` (dtype is the safetensors
  string, shape the dims joined by ``,``, empty for a scalar), UTF-8;
- lines sorted by name (code point order, which is UTF-8 byte order);
- root = sha256 (hex) of the concatenated lines.

So one model split over any number of shards, in any header order, with any
``__metadata__``, has one root; any changed bit of any tensor changes it.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import BinaryIO

from storage.digest import CHUNK_SIZE, is_sha256
from storage.errors import InvalidSafetensorsError, ManifestError
from storage.hashing import hash_tensors
from storage.header import (
    DEFAULT_LIMITS,
    DTYPE_SIZES,
    Header,
    HeaderLimits,
    TensorInfo,
    check_tensor_name,
    read_header,
    read_header_from,
)
from storage.parallel import hash_files

__all__ = [
    "DTYPE_SIZES",
    "Header",
    "Manifest",
    "TensorEntry",
    "TensorInfo",
    "manifest_of_file",
    "manifest_of_files",
    "manifest_of_path",
    "manifest_of_stream",
    "manifest_of_tensors",
    "read_header",
    "safetensors_files",
]


@dataclass(frozen=True)
class TensorEntry:
    """One line of a manifest."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    digest: str

    def __post_init__(self) -> None:
        try:
            check_tensor_name(self.name, "manifest")
        except InvalidSafetensorsError as exc:
            raise ManifestError(str(exc)) from None
        if self.dtype not in DTYPE_SIZES:
            raise ManifestError(f"tensor {self.name!r}: unknown dtype {self.dtype!r}")
        if not all(type(d) is int and d >= 0 for d in self.shape):
            raise ManifestError(f"tensor {self.name!r}: bad shape {self.shape!r}")
        if not is_sha256(self.digest):
            raise ManifestError(f"tensor {self.name!r}: bad digest {self.digest!r}")

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def line(self) -> str:
        shape = ",".join(str(d) for d in self.shape)
        return f"{self.name}\t{self.dtype}\t{shape}\t{self.digest}\n"

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "digest": self.digest,
        }


@dataclass(frozen=True)
class Manifest:
    """The sorted tensor entries of a model or adapter; `root` is its identity."""

    tensors: tuple[TensorEntry, ...]

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.tensors, key=lambda e: e.name))
        for a, b in zip(ordered, ordered[1:], strict=False):
            if a.name == b.name:
                raise ManifestError(f"duplicate tensor name {a.name!r}")
        object.__setattr__(self, "tensors", ordered)

    def canonical_bytes(self) -> bytes:
        return "".join(e.line() for e in self.tensors).encode("utf-8")

    @cached_property
    def root(self) -> str:
        return hashlib.sha256(self.canonical_bytes()).hexdigest()

    @property
    def param_count(self) -> int:
        return sum(e.numel for e in self.tensors)

    def by_name(self) -> dict[str, TensorEntry]:
        return {e.name: e for e in self.tensors}

    def __len__(self) -> int:
        return len(self.tensors)

    def __iter__(self) -> Iterator[TensorEntry]:
        return iter(self.tensors)

    def to_json(self) -> dict[str, object]:
        return {"root": self.root, "tensors": [e.to_json() for e in self.tensors]}

    @classmethod
    def from_json(cls, obj: object) -> Manifest:
        """Parse `{"root"?, "tensors": [...]}`; the root is recomputed and checked."""
        if not isinstance(obj, Mapping) or not isinstance(obj.get("tensors"), list):
            raise ManifestError("manifest must be an object with a 'tensors' list")
        manifest = cls(tuple(_entry_from_json(item) for item in obj["tensors"]))
        stated = obj.get("root")
        if stated is not None and stated != manifest.root:
            raise ManifestError(f"stated root {stated!r} differs from computed {manifest.root}")
        return manifest


def _entry_from_json(item: object) -> TensorEntry:
    keys = {"name", "dtype", "shape", "digest"}
    if not isinstance(item, Mapping) or set(item) != keys:
        raise ManifestError(f"tensor entry must have exactly {sorted(keys)}: {item!r}")
    name, dtype, shape = item["name"], item["dtype"], item["shape"]
    if not isinstance(name, str) or not isinstance(dtype, str) or not isinstance(shape, list):
        raise ManifestError(f"bad tensor entry {item!r}")
    return TensorEntry(name, dtype, tuple(shape), item["digest"])


def manifest_of_stream(
    fh: BinaryIO,
    size: int,
    label: str = "<stream>",
    chunk_size: int = CHUNK_SIZE,
    limits: HeaderLimits = DEFAULT_LIMITS,
) -> Manifest:
    """Manifest of a `size`-byte safetensors file read sequentially from `fh`; its header
    within `limits`."""
    header = read_header_from(fh, size, label, limits)
    digests = hash_tensors(fh, header, chunk_size)
    if fh.read(1):
        raise InvalidSafetensorsError(label, f"stream is longer than its stated size {size}")
    return Manifest(tuple(_entries(header, digests)))


def manifest_of_file(
    path: str | os.PathLike[str], chunk_size: int = CHUNK_SIZE, *, workers: int | None = None
) -> Manifest:
    """Manifest of one safetensors file, its tensors hashed by `workers` threads at once
    (default: the usable cores), each reading at most `chunk_size` bytes at a time."""
    return manifest_of_files([path], chunk_size=chunk_size, workers=workers)


def manifest_of_files(
    paths: Iterable[str | os.PathLike[str]],
    *,
    chunk_size: int = CHUNK_SIZE,
    workers: int | None = None,
) -> Manifest:
    """One manifest over several shards; a tensor name found in two shards is an error.

    Every header is read and checked before any tensor is hashed; then the tensors of all
    shards are hashed by `workers` threads at once (see storage.parallel), holding at most
    `workers * chunk_size` bytes of tensor data in memory.
    """
    with ExitStack() as stack:
        shards = [_open_shard(stack, os.fspath(path)) for path in paths]
        _check_no_duplicates([header for _, header in shards])
        digests = hash_files(shards, chunk_size=chunk_size, workers=workers)
    entries = [
        entry
        for (_, header), file_digests in zip(shards, digests, strict=True)
        for entry in _entries(header, file_digests)
    ]
    return Manifest(tuple(entries))


def _open_shard(stack: ExitStack, path: str) -> tuple[int, Header]:
    fh = stack.enter_context(open(path, "rb", buffering=0))
    return fh.fileno(), read_header_from(fh, os.fstat(fh.fileno()).st_size, path)


def _check_no_duplicates(headers: Sequence[Header]) -> None:
    owner: dict[str, str] = {}
    for header in headers:
        for tensor in header.tensors:
            if tensor.name in owner:
                raise ManifestError(
                    f"tensor {tensor.name!r} is in both {owner[tensor.name]} and {header.path}"
                )
            owner[tensor.name] = header.path


def manifest_of_path(path: str | os.PathLike[str], *, workers: int | None = None) -> Manifest:
    """Manifest of a safetensors file, or of every `*.safetensors` file in a directory."""
    return manifest_of_files(safetensors_files(path), workers=workers)


def safetensors_files(path: str | os.PathLike[str]) -> list[Path]:
    """`[path]` for a file; the sorted `*.safetensors` files of a directory (at least one)."""
    p = Path(path)
    if not p.is_dir():
        return [p]
    shards = sorted(p.glob("*.safetensors"))
    if not shards:
        raise ManifestError(f"{p}: no *.safetensors files in directory")
    return shards


def manifest_of_tensors(
    items: Iterable[tuple[str, str, Sequence[int], bytes | bytearray | memoryview]],
) -> Manifest:
    """Manifest of tensors already in memory: `(name, dtype, shape, contiguous bytes)`."""
    entries = []
    for name, dtype, shape, data in items:
        view = memoryview(data)
        if not view.c_contiguous:
            raise ManifestError(f"tensor {name!r}: data is not contiguous")
        dims = tuple(shape)
        itemsize = DTYPE_SIZES.get(dtype)
        if itemsize is not None and math.prod(dims) * itemsize != view.nbytes:
            raise ManifestError(
                f"tensor {name!r}: shape {list(dims)} of {dtype} needs "
                f"{math.prod(dims) * itemsize} bytes, got {view.nbytes}"
            )
        entries.append(TensorEntry(name, dtype, dims, hashlib.sha256(view).hexdigest()))
    return Manifest(tuple(entries))


def _entries(header: Header, digests: list[str]) -> Iterator[TensorEntry]:
    for t, d in zip(header.tensors, digests, strict=True):
        yield TensorEntry(t.name, t.dtype, t.shape, d)
