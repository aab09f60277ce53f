"""Registry benchmark on SQLite over real HTTP (uvicorn on loopback, one keep-alive client).

With N = 1,000 adapter versions in the database, side by side in one run:
- healthz (the cost of the HTTP stack alone, the baseline of the ratio column),
- channel resolve: GET /v1/channels/prod (200) and with If-None-Match (304),
- adapter list: GET /v1/adapters?limit=100, and filtered by capability and state,
- adapter register: POST /v1/adapters (reads the config and safetensors blobs, checks the
  fit against the backbone manifest, allocates the next version, appends an audit event).
800 versions are seeded through the service layer, the last 200 are the timed registrations.

    .venv/bin/python bench/bench_registry.py [--n 1000]
"""

from __future__ import annotations

import argparse
import itertools
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import uvicorn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "registry"))


from factories import (  # noqa: E402
    adapter_files,
    backbone_manifest_json,
    write_adapter,
    write_backbone,
)

from registry.api.app import create_app  # noqa: E402
from registry.db.migrate import upgrade  # noqa: E402
from registry.db.session import Database  # noqa: E402
from registry.domain import Principal, Role  # noqa: E402
from registry.services import adapters, backbones, capabilities, channels, lifecycle, tokens  # noqa: E402
from registry.settings import Settings  # noqa: E402
from storage import BlobStore  # noqa: E402

CAPS = ("plan", "search", "write", "code")
ADMIN = Principal("root", Role.ADMIN)
ALICE = Principal("alice", Role.PUBLISHER)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _seed(
    db: Database, store: BlobStore, tmp: Path, seeded: int
) -> tuple[str, list[dict[str, str]], str]:
    manifest = backbone_manifest_json(write_backbone(tmp / "bb"))
    file_sets = []
    for seed in range(8):
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
        draft = adapters.AdapterDraft(cap, root, file_sets[i % len(file_sets)])
        with db.write() as session:
            ids[cap] = adapters.register_adapter(
                session=session, store=store, actor=ALICE, draft=draft
            ).id
    with db.write() as session:
        for adapter_id in ids.values():
            lifecycle.approve_adapter(session=session, actor=ADMIN, adapter_id=adapter_id)
        request = channels.PromoteRequest("prod", root, dict(ids), list(CAPS), create=True)
        channels.promote(session=session, actor=ADMIN, request=request)
    return root, file_sets, secret


def _measure(
    name: str, call: Callable[[], httpx.Response], count: int, expect: int
) -> dict[str, float | str]:
    for _ in range(min(20, count)):  # warm-up
        call()
    latencies = []
    start = time.perf_counter()
    for _ in range(count):
        t0 = time.perf_counter()
        response = call()
        latencies.append(time.perf_counter() - t0)
        assert response.status_code == expect, (name, response.status_code, response.text)
    elapsed = time.perf_counter() - start
    latencies.sort()
    return {
        "name": name,
        "n": count,
        "rps": count / elapsed,
        "p50": statistics.median(latencies) * 1000,
        "p99": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="adapter versions in the database")
    parser.add_argument("--requests", type=int, default=500, help="timed requests per read row")
    args = parser.parse_args()
    timed_registrations = min(200, args.n // 5)
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        url = f"sqlite:///{tmp / 'registry.db'}"
        upgrade(url)
        settings = Settings(database_url=url, store_url=str(tmp / "blobs"))
        db = Database(url)
        app = create_app(settings, database=db)
        t0 = time.perf_counter()
        root, file_sets, secret = _seed(
            db, app.state.weact.store, tmp, args.n - timed_registrations
        )
        seed_s = time.perf_counter() - t0
        port = _free_port()
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        headers = {"Authorization": f"Bearer {secret}"}
        rows = []
        with httpx.Client(base_url=f"http://127.0.0.1:{port}/v1", headers=headers) as client:
            etag = client.get("/channels/prod").headers["etag"]
            n = args.requests
            rows.append(_measure("healthz", lambda: client.get("/healthz"), n, 200))
            rows.append(_measure("channel resolve", lambda: client.get("/channels/prod"), n, 200))
            rows.append(
                _measure(
                    "channel resolve, ETag 304",
                    lambda: client.get("/channels/prod", headers={"If-None-Match": etag}),
                    n,
                    304,
                )
            )
            rows.append(
                _measure(
                    "adapter list (limit 100)",
                    lambda: client.get("/adapters", params={"limit": 100}),
                    n // 5,
                    200,
                )
            )
            rows.append(
                _measure(
                    "adapter list (cap+state)",
                    lambda: client.get(
                        "/adapters", params={"capability": "write", "state": "approved"}
                    ),
                    n,
                    200,
                )
            )
            files = itertools.cycle(file_sets)
            body = lambda: {"capability": "write", "backbone": root, "files": next(files)}  # noqa: E731
            rows.append(
                _measure(
                    "adapter register",
                    lambda: client.post("/adapters", json=body()),
                    timed_registrations - 20,
                    201,
                )
            )
            total = client.get("/adapters", params={"limit": 1}).json()["total"]
        server.should_exit = True
        thread.join(10)
        db.dispose()
    _print_table(rows, total, args.n - timed_registrations, seed_s)


def _print_table(
    rows: list[dict[str, float | str]], total: int, seeded: int, seed_s: float
) -> None:
    base = float(rows[0]["p50"])
    print(f"registry on SQLite, {total} adapter versions ({seeded} seeded in {seed_s:.1f} s)")
    print("real HTTP (uvicorn on loopback), one keep-alive client, sequential requests")
    header = ("operation", "requests", "req/s", "p50 ms", "p99 ms", "p50 x healthz")
    print(f"{header[0]:<28}" + "".join(f"{h:>10}" for h in header[1:5]) + f"{header[5]:>15}")
    for row in rows:
        cells = f"{row['n']:>10}{row['rps']:>10.0f}{row['p50']:>10.2f}{row['p99']:>10.2f}"
        print(f"{row['name']:<28}{cells}{float(row['p50']) / base:>15.1f}")


if __name__ == "__main__":
    main()
