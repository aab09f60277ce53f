"""Helpers for tests against a real `weact serve` process: racing threads, clean checks.

A `Harness` works over plain HTTP too: give it an `httpx.Client` on the server's URL
instead of the in-process TestClient, and the same helpers (`ok`, `fails`, `adapter`, ...)
drive the real server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
from harness import Harness, make_tokens

from registry.api.app import open_blob_store
from registry.db.session import Database
from registry.launcher import EmbeddedRegistry
from registry.services.fsck import fsck
from registry.settings import Settings

T = TypeVar("T")
THREADS = 16


def at_once(work: Callable[[int], T], threads: int = THREADS) -> list[T | BaseException]:
    """Run ``work(i)`` on ``threads`` threads released together by a barrier."""
    barrier = threading.Barrier(threads)
    results: list[T | BaseException] = [RuntimeError("not run")] * threads

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertions
            results[i] = exc

    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(120)
    return results


@contextmanager
def live_harness(server: EmbeddedRegistry, tmp: Path) -> Iterator[Harness]:
    """A Harness whose requests go over HTTP to ``server`` (tokens made in its database)."""
    db = Database(server.database_url)
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    client = httpx.Client(base_url=server.url, timeout=120, limits=limits)
    try:
        yield Harness(
            client=client,  # type: ignore[arg-type]
            db=db,
            store=open_blob_store(
                Settings(database_url=server.database_url, store_url=server.store_url)
            ),
            tmp=tmp,
            tokens=make_tokens(db),
        )
    finally:
        client.close()
        db.dispose()


def statuses(responses: list[Any]) -> list[int]:
    """The HTTP statuses of racing calls (an exception fails the test at once)."""
    for response in responses:
        if isinstance(response, BaseException):
            raise response
    return [r.status_code for r in responses]


def assert_consistent(api: Harness) -> None:
    """The audit chain verifies and fsck finds nothing."""
    verified = api.ok("GET", "/events/verify", "reader")
    assert verified["ok"], verified
    with api.db.read() as session:
        report = fsck(session=session, store=api.store)
    assert report.ok, report.findings


def events_about(api: Harness, subject: str) -> list[str]:
    events = api.ok("GET", "/events?limit=1000", "reader")
    return [e["action"] for e in events if e["subject"] == subject]
