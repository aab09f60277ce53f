"""Manifest roots recomputed from resident memory.

The bytes hashed are the tensors' raw little-endian bytes as they sit in memory, under the
names and safetensors dtype strings of the files they were loaded from, so a resident root
equals `storage.manifest.manifest_of_path` of the backbone directory (`weact manifest`) and
`manifest_of_file` of an adapter's `adapter_model.safetensors`. Any bit changed in memory
after loading changes the root.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from typing import Any

from runtime.engine import AuditReport
from runtime.errors import AuditMismatchError
from storage.manifest import Manifest, manifest_of_tensors

# torch dtype name -> safetensors dtype string
SAFETENSORS_DTYPES = {
    "float64": "F64",
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "int64": "I64",
    "int32": "I32",
    "int16": "I16",
    "int8": "I8",
    "uint8": "U8",
    "bool": "BOOL",
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
}


def dtype_string(tensor: Any) -> str:
    name = str(tensor.dtype).removeprefix("torch.")
    try:
        return SAFETENSORS_DTYPES[name]
    except KeyError:
        raise AuditMismatchError(f"no safetensors dtype for {tensor.dtype}") from None


def tensor_bytes(tensor: Any) -> memoryview:
    """The tensor's raw bytes (little-endian), copied to host memory only when not there."""
    import torch

    if sys.byteorder != "little":  # pragma: no cover - every supported platform is LE
        raise AuditMismatchError("audit needs a little-endian host")
    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous().reshape(-1)
    return memoryview(t.view(torch.uint8).numpy())


def _items(tensors: Mapping[str, Any]) -> Iterator[tuple[str, str, tuple[int, ...], memoryview]]:
    for name, t in tensors.items():
        yield name, dtype_string(t), tuple(t.shape), tensor_bytes(t)


def manifest_of_resident(tensors: Mapping[str, Any]) -> Manifest:
    """Manifest of in-memory tensors keyed by the names they have in their files."""
    return manifest_of_tensors(_items(tensors))


def audit_report(
    backbone_root: str,
    expected_backbone: str | None,
    adapters: Mapping[str, str],
    expected_adapters: Mapping[str, str | None],
) -> AuditReport:
    """Compare recomputed roots with the expected ones; every mismatch goes in `detail`."""
    problems = []
    if expected_backbone is not None and backbone_root != expected_backbone:
        problems.append(f"backbone: resident {backbone_root} != expected {expected_backbone}")
    for name, root in sorted(adapters.items()):
        want = expected_adapters.get(name)
        if want is not None and root != want:
            problems.append(f"adapter {name!r}: resident {root} != expected {want}")
    return AuditReport(not problems, backbone_root, dict(adapters), "; ".join(problems))


def torch_dtype(dtype: str) -> Any:
    """The torch dtype of a safetensors dtype string."""
    import torch

    for name, code in SAFETENSORS_DTYPES.items():
        if code == dtype:
            return getattr(torch, name)
    raise AuditMismatchError(f"unknown safetensors dtype {dtype!r}")
