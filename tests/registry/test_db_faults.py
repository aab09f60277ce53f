"""PostgreSQL backends terminated under traffic (issue 25): a real `weact serve` on a fresh
database while a killer runs `pg_terminate_backend` on every connection of that database
a few times a second. No answer is a 500; every failure is 503 `unavailable` with
`Retry-After`; every write that was acknowledged (2xx) is there afterwards; the audit chain
verifies. Then `RegistryClient` reads through the same faults without an error: it retries
idempotent requests answered 503.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from harness import make_tokens
from sqlalchemy import create_engine, text
from support.fleet import fresh_pg_database

from registry.client import RegistryClient
from registry.db.session import Database
from registry.launcher import embedded_registry

pytestmark = pytest.mark.postgres

PG_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432"
TRAFFIC_S = 8.0
WRITERS = 4


@pytest.fixture
def fresh_pg(pg_url: str) -> Iterator[str]:
    """A database of its own: the killer terminates every backend connected to it."""
    with fresh_pg_database("weact_faults") as url:
        yield url


def _killer(database: str, stop: threading.Event, killed: list[int]) -> None:
    admin = create_engine(f"{PG_SERVER}/postgres", isolation_level="AUTOCOMMIT")
    sql = text(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE datname = :db AND pid <> pg_backend_pid()"
    )
    try:
        with admin.connect() as conn:
            while not stop.wait(0.15):
                killed.append(int(conn.execute(sql, {"db": database}).scalar_one()))
    finally:
        admin.dispose()


def test_terminated_backends_answer_503_and_lose_no_acknowledged_write(
    fresh_pg: str, tmp_path: Path
) -> None:
    db = Database(fresh_pg)
    tokens = make_tokens(db)
    db.dispose()
    database = fresh_pg.rsplit("/", 1)[1]
    statuses: Counter[int] = Counter()
    bad: list[str] = []
    acknowledged: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def writer(n: int, url: str) -> None:
        headers = {"Authorization": f"Bearer {tokens['admin']}"}
        with httpx.Client(base_url=f"{url}/v1", headers=headers, timeout=60) as client:
            i = 0
            while not stop.is_set():
                name = f"w{n}-{i}"
                i += 1
                for method, path, body in (
                    ("POST", "/capabilities", {"name": name, "description": "x"}),
                    ("GET", "/capabilities", None),
                    ("GET", "/events/verify", None),
                ):
                    response = client.request(method, path, json=body)
                    with lock:
                        statuses[response.status_code] += 1
                        if response.status_code == 201:
                            acknowledged.append(name)
                        elif response.status_code >= 300 and (
                            response.status_code != 503
                            or response.json().get("error") != "unavailable"
                            or not response.headers.get("Retry-After", "").isdigit()
                        ):
                            bad.append(f"{method} {path}: {response.status_code} {response.text}")

    killed: list[int] = []
    with embedded_registry(tmp_path, fresh_pg, str(tmp_path / "blobs")) as server:
        threads = [threading.Thread(target=writer, args=(n, server.url)) for n in range(WRITERS)]
        killer = threading.Thread(target=_killer, args=(database, stop, killed))
        for thread in [*threads, killer]:
            thread.start()
        time.sleep(TRAFFIC_S)
        stop.set()
        for thread in [*threads, killer]:
            thread.join(120)
        with RegistryClient(server.url, tokens["admin"]) as client:
            stored = {c["name"] for c in client.list_capabilities()}
            verified = client.verify_events()
    total = sum(statuses.values())
    print(f"{total} requests, statuses {dict(statuses)}, {sum(killed)} backends terminated "  # noqa: T201
          f"in {len(killed)} rounds, {len(acknowledged)} acknowledged writes")  # fmt: skip
    assert sum(killed) > 0, "the killer never found a backend to terminate"
    assert statuses[500] == 0, bad[:5]
    assert not bad, bad[:5]
    lost = sorted(set(acknowledged) - stored)
    assert not lost, f"{len(lost)} acknowledged writes lost: {lost[:10]}"
    assert verified["ok"], verified


def test_the_client_reads_through_terminated_backends(fresh_pg: str, tmp_path: Path) -> None:
    db = Database(fresh_pg)
    tokens = make_tokens(db)
    db.dispose()
    database = fresh_pg.rsplit("/", 1)[1]
    stop = threading.Event()
    killed: list[int] = []
    reads = 0
    with embedded_registry(tmp_path, fresh_pg, str(tmp_path / "blobs")) as server:
        killer = threading.Thread(target=_killer, args=(database, stop, killed))
        killer.start()
        try:
            with RegistryClient(server.url, tokens["reader"]) as client:
                deadline = time.monotonic() + 4
                while time.monotonic() < deadline:
                    client.list_capabilities()  # raises on a 503 it did not retry through
                    client.verify_events()
                    reads += 2
        finally:
            stop.set()
            killer.join(30)
    print(f"{reads} reads, {sum(killed)} backends terminated")  # noqa: T201
    assert sum(killed) > 0
