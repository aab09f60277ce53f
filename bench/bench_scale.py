"""Scale benchmark: the registry's reads, writes and maintenance at 1,000 and 100,000 versions.

For each database (SQLite, PostgreSQL) and each `--versions` size: a fresh registry seeded
by bench/scale_seed.py (50 capabilities; the first versions through the service layer, the
rest in bulk through the ORM models; plus a lineage chain of `--chain` versions), then
`weact serve` (1 worker) on loopback and one keep-alive client, requests taking turns
(round-robin, so every row sees the same machine):

- API reads: list (first page; a page deep in the table by cursor and by offset, the
  offset at most `MAX_OFFSET` - 50 (deeper: 422, by cursor instead); filtered by
  capability, state, tag and model-card text: rare, in every card, 2 letters), get,
  lineage of the chain's tip, channel resolve; web pages: overview, adapters (first page,
  a deep page as its next link gives it, a text search), capabilities, one adapter (its
  lineage graph);
- writes: register (a new version's files already uploaded), promote;
- maintenance, each in a child process: `fsck` and `gc --dry-run` (seconds, peak RSS).

The table puts the sizes side by side: p50 and p99 of each, and the ratio of the p50s
(target: reads within 2x). `--small` is the mode `make test` runs (seconds).

Seeding 100,000 versions takes minutes. `--keep DIR` keeps each seeded registry (SQLite
file, blobs and what the reads need under DIR; PostgreSQL: the database
`weact_scale_keep_<versions>_<chain>`) and reuses it in later runs with the same DIR;
`--only TEXT` (repeat) times just the reads whose names hold one of the texts, without the
writes and the maintenance (which would change a kept registry): seed once, time a fix many
times. Migrations newer than a kept registry are applied to it before it is read.

    nice .venv/bin/python bench/bench_scale.py [--versions 1000 --versions 100000]
        [--db sqlite --db postgresql] [--requests 200] [--chain 1000] [--small]
        [--keep DIR] [--only 'by text' --only offset]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from scale_seed import Seeded, seed  # noqa: E402
from synthetic import bench_database  # noqa: E402

from registry.db.migrate import upgrade  # noqa: E402
from registry.db.session import Database  # noqa: E402
from registry.launcher import embedded_registry  # noqa: E402
from registry.services.adapter_list import MAX_OFFSET  # noqa: E402
from storage import open_store  # noqa: E402

PER_PAGE = 50
Call = Callable[[httpx.Client], httpx.Response]


def _reads(s: Seeded, versions: int) -> list[tuple[str, Call]]:
    cap = s.capabilities[0]
    deep = max(0, versions - PER_PAGE)
    deepest_offset = min(deep, MAX_OFFSET - PER_PAGE)  # past it: 422 (after= instead)

    def get(path: str, **params: object) -> Call:
        return lambda c: c.get(path, params=params)

    return [
        ("list, first page", get("/v1/adapters", limit=PER_PAGE)),
        ("list, deep page (after=)", get("/v1/adapters", limit=PER_PAGE, after=deep)),
        (
            "list, deep page (offset=)",
            get("/v1/adapters", limit=PER_PAGE, offset=deepest_offset),
        ),
        ("list by capability", get("/v1/adapters", limit=PER_PAGE, capability=cap)),
        ("list by state", get("/v1/adapters", limit=PER_PAGE, state="candidate")),
        ("list by tag", get("/v1/adapters", limit=PER_PAGE, tag="team=t3")),
        ("list by text", get("/v1/adapters", limit=PER_PAGE, q="needle")),
        ("list by text, every card", get("/v1/adapters", limit=PER_PAGE, q="synthetic")),
        ("list by text, 2 letters", get("/v1/adapters", limit=PER_PAGE, q="ne")),
        ("get", get(f"/v1/adapters/{s.some_id}")),
        ("lineage (chain tip)", get(f"/v1/adapters/{s.chain_tip}/lineage")),
        ("channel resolve", get("/v1/channels/prod")),
        ("web /", get("/")),
        ("web /adapters", get("/adapters")),
        ("web /adapters, deep page", get("/adapters", page=deep // PER_PAGE + 1, after=deep)),
        ("web /adapters?q=", get("/adapters", q="needle")),
        ("web /capabilities", get("/capabilities")),
        ("web /adapters/{id}", get(f"/adapters/{s.some_id}")),
    ]


def _quantiles(latencies: list[float]) -> tuple[float, float]:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return statistics.median(ordered) * 1e3, p99 * 1e3


def _round_robin(client: httpx.Client, calls: list[tuple[str, Call]], count: int) -> dict:
    for _, call in calls:  # warm-up, and a check that each answers
        response = call(client)
        assert response.status_code == 200, (response.status_code, response.text[:300])
    latencies: dict[str, list[float]] = {name: [] for name, _ in calls}
    for _ in range(count):
        for name, call in calls:
            t0 = time.perf_counter()
            response = call(client)
            latencies[name].append(time.perf_counter() - t0)
            assert response.status_code == 200, (name, response.status_code)
    return {name: _quantiles(lat) for name, lat in latencies.items()}


def _writes(client: httpx.Client, s: Seeded, count: int) -> dict:
    cap = s.capabilities[0]
    spare = iter(s.spare)
    register, promote = [], []
    picks = s.channel_pick[cap]
    for i in range(count):
        body = {"capability": cap, "backbone": s.root, "files": next(spare)}
        t0 = time.perf_counter()
        response = client.post("/v1/adapters", json=body)
        register.append(time.perf_counter() - t0)
        assert response.status_code == 201, response.text[:300]
        body = {"adapters": {cap: picks[(i + 1) % len(picks)]}}
        t0 = time.perf_counter()
        response = client.post("/v1/channels/prod/promote", json=body)
        promote.append(time.perf_counter() - t0)
        assert response.status_code in (200, 201), response.text[:300]
    return {"register": _quantiles(register), "promote": _quantiles(promote)}


def _maintenance(command: str, database_url: str, store_url: str) -> tuple[float, float]:
    """Seconds and peak RSS (MiB) of `command` (fsck, gc) run in a child process."""
    argv = [sys.executable, __file__, "--child", command, database_url, store_url]
    out = subprocess.run(argv, check=True, capture_output=True, text=True, timeout=3600)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return float(result["seconds"]), float(result["rss_mib"])


def _child(command: str, database_url: str, store_url: str) -> None:
    from registry.services.fsck import fsck
    from registry.services.gc import collect_garbage

    database, store = Database(database_url), open_store(store_url)
    t0 = time.perf_counter()
    if command == "fsck":
        with database.read() as session:
            report = fsck(session=session, store=store)
        assert report.ok, report.findings[:5]
    else:
        collect_garbage(database=database, store=store, grace_s=0, dry_run=True)
    seconds = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "rss_mib": rss}))


@contextmanager
def _kept_database(kind: str, directory: Path, pg_url: str, name: str) -> Iterator[str]:
    """The URL of a database kept across runs: a file in `directory`, or (PostgreSQL) the
    database `name` on `pg_url`'s server, created when absent."""
    if kind == "sqlite":
        yield f"sqlite:///{directory / 'registry.db'}"
        return
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        found = conn.scalar(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name})
        if not found:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    admin.dispose()
    yield make_url(pg_url).set(database=name).render_as_string(hide_password=False)


@contextmanager
def _registry(kind: str, versions: int, args: argparse.Namespace) -> Iterator[tuple[Path, str]]:
    """A directory for the run and the database URL: scratch ones, or with `--keep` the
    kept ones of this database, size and chain."""
    if args.keep is None:
        with (
            tempfile.TemporaryDirectory() as tmp_dir,
            bench_database(kind, Path(tmp_dir), args.pg_url, prefix="weact_scale") as url,
        ):
            yield Path(tmp_dir), url
        return
    directory = Path(args.keep).resolve() / f"{kind}-{versions}-{args.chain}"
    directory.mkdir(parents=True, exist_ok=True)
    name = f"weact_scale_keep_{versions}_{args.chain}"
    with _kept_database(kind, directory, args.pg_url, name) as url:
        yield directory, url


def bench_one(kind: str, versions: int, args: argparse.Namespace) -> dict:
    with _registry(kind, versions, args) as (tmp, url):
        upgrade(url)
        store_url, saved = str(tmp / "blobs"), tmp / "seeded.json"
        seed_s = 0.0
        if saved.exists():
            seeded = Seeded(**json.loads(saved.read_text()))
        else:
            db = Database(url)
            t0 = time.perf_counter()
            seeded = seed(db, open_store(store_url), tmp / "files", versions, args.chain)
            seed_s = time.perf_counter() - t0
            db.dispose()
            if args.keep is not None:
                saved.write_text(json.dumps(dataclasses.asdict(seeded)))
        serve = tmp / f"serve-{os.getpid()}"
        serve.mkdir()
        headers = {"Authorization": f"Bearer {seeded.secret}"}
        reads = _reads(seeded, versions)
        if args.only:
            reads = [(name, call) for name, call in reads if any(t in name for t in args.only)]
        with (
            embedded_registry(serve, url, store_url) as server,
            httpx.Client(base_url=server.url, headers=headers, timeout=120) as client,
        ):
            rows = _round_robin(client, reads, args.requests)
            if not args.only:
                rows.update(_writes(client, seeded, args.writes))
        maintenance = {}
        if not args.only:
            maintenance = {cmd: _maintenance(cmd, url, store_url) for cmd in ("fsck", "gc")}
    return {"seed_s": seed_s, "rows": rows, "maintenance": maintenance}


def _print(kind: str, sizes: list[int], results: dict[int, dict]) -> None:
    small, large = sizes[0], sizes[-1]
    seeds = ", ".join(f"{n:,}: {results[n]['seed_s']:.0f} s" for n in sizes)
    print(f"\n{kind}: p50 / p99 ms at {small:,} and {large:,} versions (seeded in {seeds})")
    print(f"{'operation':28}{'p50':>9}{'p99':>9}{'p50':>10}{'p99':>9}{'p50 ratio':>11}")
    for name in results[small]["rows"]:
        (a50, a99), (b50, b99) = results[small]["rows"][name], results[large]["rows"][name]
        print(f"{name:28}{a50:9.2f}{a99:9.2f}{b50:10.2f}{b99:9.2f}{b50 / a50:10.2f}x")
    for cmd in results[small]["maintenance"]:
        (a_s, a_mb) = results[small]["maintenance"][cmd]
        (b_s, b_mb) = results[large]["maintenance"][cmd]
        print(
            f"{cmd + ' (s, peak RSS MiB)':28}{a_s:9.2f}{a_mb:9.0f}{b_s:10.2f}{b_mb:9.0f}"
            f"{b_s / a_s:10.2f}x"
        )


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        _child(*sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, action="append", help="sizes (repeat)")
    parser.add_argument("--db", action="append", choices=("sqlite", "postgresql"))
    parser.add_argument("--requests", type=int, default=200, help="timed requests per read")
    parser.add_argument("--writes", type=int, default=40, help="timed registers and promotes")
    parser.add_argument("--chain", type=int, default=1000, help="depth of the lineage chain")
    parser.add_argument("--small", action="store_true", help="seconds: 100 vs 400 versions")
    parser.add_argument("--keep", metavar="DIR", help="keep the seeded registries, reuse them")
    parser.add_argument(
        "--only", action="append", metavar="TEXT", help="time only the reads named so (repeat)"
    )
    parser.add_argument(
        "--pg-url",
        default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
        help="a database of the PostgreSQL server the scratch databases are created on",
    )
    args = parser.parse_args()
    if args.small:
        args.versions = args.versions or [100, 400]
        args.requests, args.writes, args.chain = min(args.requests, 10), 3, min(args.chain, 50)
    sizes = sorted(args.versions or [1000, 100_000])
    print("command:", " ".join(sys.argv), f"| load average at start: {os.getloadavg()}")
    for kind in args.db or ["sqlite", "postgresql"]:
        results = {}
        for n in sizes:
            results[n] = bench_one(kind, n, args)
            print(f"{kind}, {n:,} versions, load {os.getloadavg()}:", json.dumps(results[n]))
        _print(kind, sizes, results)
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
