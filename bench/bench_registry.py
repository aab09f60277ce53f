"""Registry benchmark over real HTTP on SQLite and PostgreSQL: `weact serve` in its own
process(es) on loopback, side by side in one run.

With N = 1,000 adapter versions in each database:
- one keep-alive client, sequential requests, one server process:
  healthz (the cost of the HTTP stack alone, the baseline of the ratio column), channel
  resolve GET /v1/channels/prod (200; served from memory) and with If-None-Match (304)
  taking turns request by request (so that the ratio holds while the machine's load drifts),
  adapter list (limit 100, and filtered by capability and state), adapter register
  (reads the blobs, checks the fit, allocates the next version, appends an audit event);
- 16 concurrent clients (4 processes x 4 threads, one keep-alive connection each) resolving
  the channel for `--seconds`, against `weact serve --workers 1` and `--workers W`
  (default W: the core count), both running, taking turns in 4 rounds: throughput, p50, p99.
800 versions are seeded through the service layer, the last 200 are the timed registrations.
PostgreSQL: a scratch database created through `--pg-url` (dropped afterwards).

    nice .venv/bin/python bench/bench_registry.py [--n 1000] [--db sqlite --db postgresql]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from synthetic import (  # noqa: E402
    adapter_files,
    backbone_manifest_json,
    bench_database,
    write_adapter,
    write_backbone,
)

from registry.db.migrate import upgrade  # noqa: E402
from registry.db.session import Database  # noqa: E402
from registry.domain import Principal, Role  # noqa: E402
from registry.launcher import embedded_registry  # noqa: E402
from registry.services import adapters, backbones, capabilities, channels, lifecycle, tokens  # noqa: E402
from storage import BlobStore, open_store  # noqa: E402

CAPS = ("plan", "search", "write", "code")
ADMIN = Principal("root", Role.ADMIN)
ALICE = Principal("alice", Role.PUBLISHER)
CLIENT_PROCESSES = 4
ROUNDS = 4  # the 1-worker and W-worker servers take turns
WARMUP = 20  # untimed requests before each timed row
Row = dict[str, float | str]


def _seed(
    db: Database, store: BlobStore, tmp: Path, seeded: int, spare: int
) -> tuple[str, list, str]:
    """`seeded` versions registered; the file sets of `spare` more returned unregistered (the
    registry refuses bytes it already holds, so every version needs its own)."""
    manifest = backbone_manifest_json(write_backbone(tmp / "bb"))
    file_sets = []
    for seed in range(seeded + spare):
        data = adapter_files(write_adapter(tmp / f"a{seed}", seed=seed))
        file_sets.append({name: store.put([blob]) for name, blob in data.items()})
    with db.write() as session:
        root = backbones.register_backbone(
            session=session, store=store, actor=ADMIN, name="bb", manifest=manifest
        ).root
        for cap in CAPS:
            capabilities.create_capability(
                session=session, actor=ADMIN, name=cap, description="", order=None
            )
        _, secret = tokens.create_token(session=session, name="bench", role=Role.ADMIN)
    ids: dict[str, int] = {}
    for i in range(seeded):
        cap = CAPS[i % len(CAPS)]
        draft = adapters.AdapterDraft(cap, root, file_sets[i])
        ids[cap] = adapters.register_adapter(database=db, store=store, actor=ALICE, draft=draft).id
    with db.write() as session:
        for adapter_id in ids.values():
            lifecycle.approve_adapter(session=session, actor=ADMIN, adapter_id=adapter_id)
        request = channels.PromoteRequest("prod", root, dict(ids), list(CAPS), create=True)
        channels.promote(session=session, actor=ADMIN, request=request)
    return root, file_sets[seeded:], secret


def _measure(name: str, call: Callable[[], httpx.Response], count: int, expect: int) -> Row:
    for _ in range(min(WARMUP, count)):
        call()
    latencies = []
    start = time.perf_counter()
    for _ in range(count):
        t0 = time.perf_counter()
        response = call()
        latencies.append(time.perf_counter() - t0)
        assert response.status_code == expect, (name, response.status_code, response.text)
    elapsed = time.perf_counter() - start
    return _row(name, latencies, elapsed)


def _interleaved(
    calls: list[tuple[str, Callable[[], httpx.Response], int]], count: int
) -> list[Row]:
    """Round-robin over `calls`, so that each sees the same machine (load drifts)."""
    for _, call, _ in calls:
        for _ in range(20):  # warm-up
            call()
    latencies: list[list[float]] = [[] for _ in calls]
    spent = [0.0] * len(calls)
    for _ in range(count):
        for i, (name, call, expect) in enumerate(calls):
            t0 = time.perf_counter()
            response = call()
            latencies[i].append(time.perf_counter() - t0)
            spent[i] += latencies[i][-1]
            assert response.status_code == expect, (name, response.status_code, response.text)
    return [_row(name, latencies[i], spent[i]) for i, (name, _, _) in enumerate(calls)]


def _row(name: str, latencies: list[float], elapsed: float) -> Row:
    latencies.sort()
    return {
        "name": name,
        "n": len(latencies),
        "rps": len(latencies) / elapsed,
        "p50": statistics.median(latencies) * 1000,
        "p99": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000,
    }


def _sequential(
    url: str, secret: str, root: str, file_sets: list, args: argparse.Namespace
) -> list[Row]:
    headers = {"Authorization": f"Bearer {secret}"}
    n, rows = args.requests, []
    with httpx.Client(base_url=f"{url}/v1", headers=headers) as client:
        etag = client.get("/channels/prod").headers["etag"]
        not_modified = {"If-None-Match": etag}
        rows += _interleaved(
            [
                ("healthz", lambda: client.get("/healthz"), 200),
                ("channel resolve", lambda: client.get("/channels/prod"), 200),
                (
                    "channel resolve, ETag 304",
                    lambda: client.get("/channels/prod", headers=not_modified),
                    304,
                ),
            ],
            n,
        )
        rows.append(
            _measure(
                "adapter list (limit 100)",
                lambda: client.get("/adapters", params={"limit": 100}),
                n // 5,
                200,
            )
        )
        by_state = {"capability": "write", "state": "approved"}
        rows.append(
            _measure(
                "adapter list (cap+state)", lambda: client.get("/adapters", params=by_state), n, 200
            )
        )
        files = iter(file_sets)
        body = lambda: {"capability": "write", "backbone": root, "files": next(files)}  # noqa: E731
        rows.append(
            _measure(
                "adapter register",
                lambda: client.post("/adapters", json=body()),
                max(5, args.registrations - WARMUP),
                201,
            )
        )
    return rows


def _resolve_loop(
    url: str, secret: str, threads: int, start_at: float, stop_at: float
) -> list[float]:
    """One client process: `threads` keep-alive clients resolving until `stop_at`."""
    out: list[list[float]] = [[] for _ in range(threads)]

    def run(i: int) -> None:
        with httpx.Client(headers={"Authorization": f"Bearer {secret}"}, timeout=30) as client:
            client.get(f"{url}/v1/channels/prod")
            while time.time() < start_at:
                client.get(f"{url}/v1/channels/prod")  # warm until everyone is ready
            while (now := time.time()) < stop_at:
                response = client.get(f"{url}/v1/channels/prod")
                out[i].append(time.time() - now)
                assert response.status_code == 200, response.text

    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return [x for lat in out for x in lat]


def _concurrent(url: str, secret: str, clients: int, seconds: float) -> list[float]:
    threads = clients // CLIENT_PROCESSES
    start_at = time.time() + 3.0  # client processes start and warm up meanwhile
    with ProcessPoolExecutor(CLIENT_PROCESSES) as pool:
        futures = [
            pool.submit(_resolve_loop, url, secret, threads, start_at, start_at + seconds)
            for _ in range(CLIENT_PROCESSES)
        ]
        return [x for f in futures for x in f.result()]


def _bench(kind: str, args: argparse.Namespace) -> dict[str, object]:
    with (
        tempfile.TemporaryDirectory() as tmp_dir,
        bench_database(kind, Path(tmp_dir), args.pg_url) as url,
    ):
        tmp = Path(tmp_dir)
        upgrade(url)
        store_url = str(tmp / "blobs")
        db = Database(url)
        t0 = time.perf_counter()
        seeded = args.n - args.registrations
        root, file_sets, secret = _seed(
            db, open_store(store_url), tmp, seeded, args.registrations + WARMUP
        )
        seed_s = time.perf_counter() - t0
        db.dispose()
        with ExitStack() as stack:
            servers = {}
            for workers in (1, args.workers):
                directory = tmp / f"serve-{workers}"
                directory.mkdir()
                servers[workers] = stack.enter_context(
                    embedded_registry(directory, url, store_url, workers=workers)
                )
            sequential = _sequential(servers[1].url, secret, root, file_sets, args)
            latencies: dict[int, list[float]] = {workers: [] for workers in servers}
            for _ in range(ROUNDS):  # alternate, so that both see the same machine
                for workers, server in servers.items():
                    latencies[workers] += _concurrent(server.url, secret, 16, args.seconds / ROUNDS)
        concurrent = [
            (workers, _row("16 clients", lat, args.seconds)) for workers, lat in latencies.items()
        ]
    return {"kind": kind, "seed_s": seed_s, "sequential": sequential, "concurrent": concurrent}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="adapter versions in the database")
    parser.add_argument("--requests", type=int, default=500, help="timed requests per read row")
    parser.add_argument("--seconds", type=float, default=5.0, help="per concurrent row")
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--db", action="append", choices=("sqlite", "postgresql"))
    parser.add_argument(
        "--pg-url",
        default="postgresql+psycopg://postgres@127.0.0.1:5432/test",
        help="where to create the scratch PostgreSQL database",
    )
    args = parser.parse_args()
    args.registrations = min(200, args.n // 5)
    load_at_start = os.getloadavg()
    results = [_bench(kind, args) for kind in (args.db or ["sqlite", "postgresql"])]
    for result in results:
        _print(result, args)
    print(
        f"load average (1, 5, 15 min): {load_at_start} at the start, {os.getloadavg()} at the end"
    )


def _print(result: dict[str, object], args: argparse.Namespace) -> None:
    rows: list[Row] = result["sequential"]  # type: ignore[assignment]
    base = float(rows[0]["p50"])
    print(
        f"registry on {result['kind']}, {args.n} adapter versions "
        f"({args.n - args.registrations} seeded in {result['seed_s']:.1f} s)"
    )
    print("real HTTP (weact serve on loopback, 1 worker), one keep-alive client, sequential")
    header = ("operation", "requests", "req/s", "p50 ms", "p99 ms", "p50 x healthz")
    print(f"{header[0]:<28}" + "".join(f"{h:>10}" for h in header[1:5]) + f"{header[5]:>15}")
    for row in rows:
        cells = f"{row['n']:>10}{row['rps']:>10.0f}{row['p50']:>10.2f}{row['p99']:>10.2f}"
        print(f"{row['name']:<28}{cells}{float(row['p50']) / base:>15.2f}")
    print(f"channel resolve, 16 concurrent clients for {args.seconds:.0f} s")
    print(f"{'workers':<28}{'requests':>10}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}")
    for workers, row in result["concurrent"]:  # type: ignore[attr-defined]
        cells = f"{row['n']:>10}{row['rps']:>10.0f}{row['p50']:>10.2f}{row['p99']:>10.2f}"
        print(f"{workers:<28}{cells}")
    print()


if __name__ == "__main__":
    main()
