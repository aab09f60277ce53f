"""Manifest hashing vs one plain hashlib.sha256 pass over the same file, side by side.

For each of three >= 512 MiB safetensors files (a transformer-like mix of matrices and
vectors; the same with a 100 MiB embedding first; one single 512 MiB tensor) this times, in
turn and in rounds, a plain single-stream sha256 of the whole file, the manifest on one
thread and the manifest on every usable core, with the page cache warm. It prints each
ratio per round (min / median / max: rounds time the contenders side by side, so a busy
machine slows them alike) and from the best times, checks the parallel roots equal the
sequential ones, and prints the peak RSS of a process computing the manifest. On a shared,
busy machine wall times say little about parallelism, so it also prints the CPU time of
the busiest thread: on idle cores the wall time is about that when the threads do not wait
for each other (no tensor larger than the file over the core count), which gives an
estimate of the idle-machine ratio.

Target (issue 12): parallel manifest / plain sha256 <= 0.6 on 2 cores for the mixed file.
A tensor's digest is sequential, so no split makes a file faster than hashing its largest
tensor: the single-tensor file shows that floor (only reading overlaps hashing there).
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storage import (  # noqa: E402
    manifest_of_file,
    manifest_of_stream,
    parallel,  # noqa: E402
)
from storage.parallel import _work, default_workers  # noqa: E402

MIB = 1024 * 1024
TARGET_BYTES = 512 * MIB
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
TARGET = 0.6
Spec = tuple[str, str, list[int]]


def _nbytes(dtype: str, shape: list[int]) -> int:
    n = {"BF16": 2, "F32": 4}[dtype]
    for d in shape:
        n *= d
    return n


def layer_specs(target: int, first: list[Spec] | None = None) -> list[Spec]:
    """`first`, then tensors of a small transformer, repeated in layers until `target` bytes."""
    specs = list(first or [])
    total, i = sum(_nbytes(dtype, shape) for _, dtype, shape in specs), 0
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


FILES: dict[str, list[Spec]] = {
    "mixed layers": layer_specs(TARGET_BYTES),
    "100 MiB embedding + layers": layer_specs(
        TARGET_BYTES, [("model.embed_tokens.weight", "BF16", [25600, 2048])]
    ),
    "one 512 MiB tensor": [("model.weight", "BF16", [TARGET_BYTES // 2])],
}


def write_file(path: Path, specs: list[Spec]) -> int:
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


CHILD = """
import sys
from storage import manifest_of_file

def status(key):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(key))

with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # reset the peak RSS (VmHWM) to the current RSS
before = status("VmRSS:")
manifest_of_file(sys.argv[1])
print(before, status("VmHWM:"))
"""


def child_rss(path: Path) -> tuple[int, int]:
    """RSS (KiB) of a fresh interpreter after importing storage, and its peak while it
    computes the manifest of `path` (Linux: /proc/self/clear_refs resets the peak)."""
    root = str(Path(__file__).resolve().parents[1])
    args = [sys.executable, "-c", CHILD, str(path)]
    out = subprocess.run(args, capture_output=True, text=True, check=True, cwd=root)
    before, peak = out.stdout.split()
    return int(before), int(peak)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Run(NamedTuple):
    wall: float
    cpu: float  # the whole process
    busiest: float  # CPU of the busiest thread: about the wall time on idle cores


WORKER_CPU: list[float] = []


def _timed_work(schedule: Any, buffer_size: int) -> None:
    """storage.parallel's worker loop, recording the CPU time of the thread running it."""
    start = time.thread_time()
    try:
        _work(schedule, buffer_size)
    finally:
        WORKER_CPU.append(time.thread_time() - start)


def measure(contenders: dict[str, Callable[[], object]]) -> dict[str, list[Run]]:
    """Each contender's Run per round, the contenders taking turns in every round."""
    times: dict[str, list[Run]] = {name: [] for name in contenders}
    parallel._work = _timed_work
    for _ in range(ROUNDS):
        for name, fn in contenders.items():
            WORKER_CPU.clear()
            cpu, thread, start = cpu_seconds(), time.thread_time(), time.perf_counter()
            fn()
            wall = time.perf_counter() - start
            busiest = max(WORKER_CPU, default=time.thread_time() - thread)
            times[name].append(Run(wall, cpu_seconds() - cpu, busiest))
    parallel._work = _work
    return times


def spread(values: list[float]) -> str:
    return f"min {min(values):.2f}  median {statistics.median(values):.2f}  max {max(values):.2f}"


def bench_file(label: str, specs: list[Spec], tmp: Path, workers: int) -> None:
    path = tmp / "model.safetensors"
    size = write_file(path, specs)
    plain_sha256(path)  # warm the page cache for every contender
    with open(path, "rb") as fh:
        sequential = manifest_of_stream(fh, size)
    assert manifest_of_file(path, workers=1) == sequential
    assert manifest_of_file(path, workers=workers) == sequential
    times = measure(
        {
            "plain sha256": lambda: plain_sha256(path),
            "manifest, 1 thread": lambda: manifest_of_file(path, workers=1),
            f"manifest, {workers} threads": lambda: manifest_of_file(path, workers=workers),
        }
    )
    largest = max(_nbytes(dtype, shape) for _, dtype, shape in specs)
    print(f"\n== {label}: {size / MIB:.0f} MiB, {len(specs)} tensors", end=" ")
    print(f"(largest {largest / MIB:.0f} MiB)")
    print("   roots identical to the sequential stream path: yes")
    gib = size / 1024**3
    for name, runs in times.items():
        best = min(r.wall for r in runs)
        cpu = statistics.median(r.cpu for r in runs)
        busiest = statistics.median(r.busiest for r in runs)
        print(f"   {name:22s} best {best:.3f} s ({gib / best:.2f} GiB/s)", end="  ")
        print(f"median cpu {cpu:.3f} s, busiest thread {busiest:.3f} s")
    plain = times["plain sha256"]
    for name in list(times)[1:]:
        runs = times[name]
        per_round = [r.wall / p.wall for r, p in zip(runs, plain, strict=True)]
        best = min(r.wall for r in runs) / min(p.wall for p in plain)
        print(f"   ratio {name} / plain sha256: best {best:.3f}; per round {spread(per_round)}")
        if largest * workers <= size:  # else the threads take turns on one tensor
            busiest = [r.busiest / p.busiest for r, p in zip(runs, plain, strict=True)]
            print(f"     busiest-thread CPU ratio (idle-machine estimate): {spread(busiest)}")
    if label == "mixed layers":
        before, peak = child_rss(path)
        over = (peak - before) / 1024
        print(f"   peak RSS of a process computing it: {peak / 1024:.0f} MiB", end=" ")
        print(f"({over:.0f} MiB over its RSS before; bound: {workers} x 8 MiB buffers)")
    path.unlink()


def main() -> None:
    workers = default_workers()
    print(f"{ROUNDS} rounds, {workers} usable cores", end="; ")
    print(f"target: mixed layers, {workers} threads / plain sha256 <= {TARGET}")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        for label, specs in FILES.items():
            bench_file(label, specs, Path(tmp), workers)


if __name__ == "__main__":
    main()
