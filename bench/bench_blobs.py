"""Local blob store put / verified get vs their floors, measured side by side in one run.

put = read + sha256 + write + fsync + rename; its floor is the slower of `cp` + fsync of the
copy (the I/O a durable put must do) and one single-stream sha256 of the file (the hashing
it must do). get = `store.get_file`, a verified read written to a temp file renamed into
place; its floor is the slower of `cp` of the stored blob and that sha256. Targets: put <=
1.1x and get <= 1.1x their floor. For comparison (no target): the blob streamed through
`store.open` and `shutil.copyfileobj`, which copies every chunk out of the reader.

Each round times every contender once, in turn, so a busy machine slows them alike; the
ratios are printed per round (min / median / max over the rounds) and from the best times.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storage import CHUNK_SIZE, LocalBlobStore  # noqa: E402

MIB = 1024 * 1024
SIZE = 512 * MIB
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
TARGET = 1.1

Contender = tuple[str, Callable[[], object], Callable[[], object]]  # name, timed, untimed setup


def cp(src: Path, dst: Path, fsync: bool) -> None:
    subprocess.run(["cp", str(src), str(dst)], check=True)
    if fsync:
        fd = os.open(dst, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)


def plain_sha256(path: Path) -> str:
    hasher = hashlib.sha256()
    view = memoryview(bytearray(CHUNK_SIZE))
    with open(path, "rb", buffering=0) as fh:
        while n := fh.readinto(view):
            hasher.update(view[:n])
    return hasher.hexdigest()


def cpu_seconds() -> float:
    """CPU time of this process and its waited-for children (`cp`)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def measure(contenders: list[Contender], rounds: int) -> dict[str, list[tuple[float, float]]]:
    """(wall, cpu) seconds of each contender per round, the contenders taking turns."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in contenders}
    for _ in range(rounds):
        for name, fn, setup in contenders:
            setup()
            cpu, start = cpu_seconds(), time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start, cpu_seconds() - cpu))
    return times


def spread(values: list[float]) -> str:
    return (
        f"min {min(values):.2f}x  median {statistics.median(values):.2f}x  max {max(values):.2f}x"
    )


def report(times: dict[str, list[tuple[float, float]]]) -> None:
    gib = SIZE / 1024**3
    walls = {name: [wall for wall, _ in runs] for name, runs in times.items()}
    for name, runs in times.items():
        best, median = min(walls[name]), statistics.median(walls[name])
        cpu = statistics.median(c for _, c in runs)
        print(f"{name:20s} best {best:.3f} s ({gib / best:.2f} GiB/s)", end="  ")
        print(f"median {median:.3f} s, cpu {cpu:.3f} s")
    for label, op, floors in [
        ("put / max(cp+fsync, sha256)", "put", ("cp + fsync", "sha256 (one stream)")),
        ("get / max(cp, sha256)", "get (verified)", ("cp of the blob", "sha256 (one stream)")),
    ]:
        per_round = [
            t / max(walls[floors[0]][i], walls[floors[1]][i]) for i, t in enumerate(walls[op])
        ]
        best = min(walls[op]) / max(min(walls[f]) for f in floors)
        print(f"ratio {label}: best {best:.2f}x (target <= {TARGET}x)")
        print(f"  per round: {spread(per_round)}")


def main() -> None:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        src, dst = Path(tmp) / "src.bin", Path(tmp) / "dst.bin"
        block = os.urandom(16 * MIB)
        with open(src, "wb") as fh:
            for _ in range(SIZE // len(block)):
                fh.write(block)
        store = LocalBlobStore(Path(tmp) / "store")
        with src.open("rb") as fh:
            digest = store.put(fh)
        blob = store.path_of(digest)

        def put() -> None:
            with src.open("rb") as fh:
                assert store.put(fh) == digest

        def get() -> None:
            assert store.get_file(digest, dst) == SIZE

        def get_streamed() -> None:
            with store.open(digest) as fh, open(dst, "wb") as out:
                shutil.copyfileobj(fh, out, CHUNK_SIZE)

        def no_dst() -> None:
            dst.unlink(missing_ok=True)

        def no_blob() -> None:
            no_dst()
            if store.exists(digest):
                store.delete(digest)

        def with_blob() -> None:
            no_dst()
            if not store.exists(digest):
                put()

        contenders: list[Contender] = [
            ("sha256 (one stream)", lambda: plain_sha256(src), no_dst),
            ("cp + fsync", lambda: cp(src, dst, fsync=True), no_dst),
            ("put", put, no_blob),
            ("cp of the blob", lambda: cp(blob, dst, fsync=False), with_blob),
            ("get (verified)", get, with_blob),
            ("get via open()", get_streamed, with_blob),
        ]
        plain_sha256(src)  # warm the page cache
        times = measure(contenders, ROUNDS)
    print(f"{SIZE / MIB:.0f} MiB, {ROUNDS} rounds, {os.cpu_count()} cores")
    report(times)


if __name__ == "__main__":
    main()
