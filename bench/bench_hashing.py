"""Manifest hashing vs one plain hashlib.sha256 pass over the same file, side by side.

Generates a >= 512 MiB safetensors file in a temp dir (a transformer-like mix of large
matrices and small vectors), warms the page cache, then alternates the two measurements
and prints the best of each and their ratio (target: manifest <= 1.15x plain sha256).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storage import manifest_of_file  # noqa: E402

MIB = 1024 * 1024
TARGET_BYTES = 512 * MIB
REPEATS = 3


def layer_specs(target: int) -> list[tuple[str, str, list[int]]]:
    """Tensors of a small transformer, repeated in layers until `target` bytes."""
    specs, total, i = [], 0, 0
    while total < target:
        layer = [
            (f"model.layers.{i}.self_attn.q_proj.weight", "BF16", [2048, 2048]),
            (f"model.layers.{i}.self_attn.k_proj.weight", "BF16", [512, 2048]),
            (f"model.layers.{i}.self_attn.v_proj.weight", "BF16", [512, 2048]),
            (f"model.layers.{i}.self_attn.o_proj.weight", "BF16", [2048, 2048]),
            (f"model.layers.{i}.mlp.gate_proj.weight", "BF16", [5632, 2048]),
            (f"model.layers.{i}.mlp.up_proj.weight", "BF16", [5632, 2048]),
            (f"model.layers.{i}.mlp.down_proj.weight", "BF16", [2048, 5632]),
            (f"model.layers.{i}.input_layernorm.weight", "F32", [2048]),
            (f"model.layers.{i}.post_attention_layernorm.weight", "F32", [2048]),
        ]
        specs += layer
        total += sum(_nbytes(dtype, shape) for _, dtype, shape in layer)
        i += 1
    return specs


def _nbytes(dtype: str, shape: list[int]) -> int:
    n = {"BF16": 2, "F32": 4}[dtype]
    for d in shape:
        n *= d
    return n


def write_file(path: Path, specs: list[tuple[str, str, list[int]]]) -> int:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dtype, shape in specs:
        end = offset + _nbytes(dtype, shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, end]}
        offset = end
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    block = os.urandom(16 * MIB)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)
        left = offset
        while left:
            left -= fh.write(block[: min(left, len(block))])
    return path.stat().st_size


def plain_sha256(path: Path) -> str:
    hasher = hashlib.sha256()
    view = memoryview(bytearray(8 * MIB))
    with open(path, "rb", buffering=0) as fh:
        while n := fh.readinto(view):
            hasher.update(view[:n])
    return hasher.hexdigest()


def child_peak_rss(path: Path | None) -> int:
    """Peak RSS (KiB) of a fresh interpreter that imports storage and maybe hashes `path`."""
    code = (
        "import resource, sys; from storage import manifest_of_file\n"
        "if len(sys.argv) > 1: manifest_of_file(sys.argv[1])\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    args = [sys.executable, "-c", code] + ([str(path)] if path else [])
    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run(args, capture_output=True, text=True, check=True, cwd=root)
    return int(out.stdout)


def best_of(fn: Callable[[], object]) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.safetensors"
        size = write_file(path, layer_specs(TARGET_BYTES))
        plain_sha256(path)  # warm the page cache for both contenders
        t_manifest, t_plain = [], []
        for _ in range(REPEATS):
            t_plain.append(best_of(lambda: plain_sha256(path)))
            t_manifest.append(best_of(lambda: manifest_of_file(path)))
        tensors = len(manifest_of_file(path))
        rss_base, rss_manifest = child_peak_rss(None), child_peak_rss(path)
    plain, manifest = min(t_plain), min(t_manifest)
    gib = size / 1024**3
    print(f"file: {size / MIB:.0f} MiB, {tensors} tensors")
    print(f"plain hashlib.sha256 pass: {plain:.3f} s ({gib / plain:.2f} GiB/s)")
    print(f"manifest_of_file:          {manifest:.3f} s ({gib / manifest:.2f} GiB/s)")
    print(
        f"peak RSS of a process computing it: {rss_manifest / 1024:.0f} MiB "
        f"({(rss_manifest - rss_base) / 1024:.0f} MiB over one that only imports storage)"
    )
    print(f"ratio manifest / plain sha256: {manifest / plain:.3f}x (target <= 1.15x)")


if __name__ == "__main__":
    main()
