"""Local blob store put/get throughput vs `cp` of the same file, side by side in one run.

put = read + sha256 + write + fsync + rename; get = verified streaming read written to a
file. `cp` does no hashing and no fsync, so it is shown both plain and followed by an fsync
of the copy (the durability `put` gives). Ratios: store time / cp time.
"""

from __future__ import annotations

import os
import shutil
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
REPEATS = 3


def timed(fn: Callable[[], object], before: Callable[[], object] = lambda: None) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        before()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def cp(src: Path, dst: Path, fsync: bool) -> None:
    subprocess.run(["cp", str(src), str(dst)], check=True)
    if fsync:
        fd = os.open(dst, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)


def main() -> None:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        src, dst = Path(tmp) / "src.bin", Path(tmp) / "dst.bin"
        block = os.urandom(16 * MIB)
        with open(src, "wb") as fh:
            for _ in range(SIZE // len(block)):
                fh.write(block)
        store = LocalBlobStore(Path(tmp) / "store")
        digest = store.put(src.open("rb"))

        def put() -> None:
            with src.open("rb") as fh:
                store.put(fh)

        def get() -> None:
            with store.open(digest) as fh, open(dst, "wb") as out:
                shutil.copyfileobj(fh, out, CHUNK_SIZE)

        def drop() -> None:
            if store.exists(digest):
                store.delete(digest)
            dst.unlink(missing_ok=True)

        t_cp = timed(lambda: cp(src, dst, fsync=False), lambda: dst.unlink(missing_ok=True))
        t_cp_sync = timed(lambda: cp(src, dst, fsync=True), lambda: dst.unlink(missing_ok=True))
        t_put = timed(put, drop)
        store.put(src.open("rb"))
        t_get = timed(get, lambda: dst.unlink(missing_ok=True))
        t_cp_blob = timed(
            lambda: cp(store.path_of(digest), dst, fsync=False), lambda: dst.unlink(missing_ok=True)
        )
    gib = SIZE / 1024**3
    for label, t in [
        ("cp", t_cp),
        ("cp + fsync", t_cp_sync),
        ("put (hash+fsync)", t_put),
        ("get (verified)", t_get),
        ("cp of the blob", t_cp_blob),
    ]:
        print(f"{label:18s} {t:.3f} s  {gib / t:.2f} GiB/s")
    print(f"ratio put / cp:          {t_put / t_cp:.2f}x")
    print(f"ratio put / (cp+fsync):  {t_put / t_cp_sync:.2f}x")
    print(f"ratio get / cp of blob:  {t_get / t_cp_blob:.2f}x")


if __name__ == "__main__":
    main()
