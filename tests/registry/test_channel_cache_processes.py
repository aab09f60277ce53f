"""Channel caches across real `weact serve` processes and workers (real HTTP).

A client behind a load balancer reaches another process than the one it wrote through; the
other process serves channel reads from memory and hears of the write a notification later.
The client sends the highest revision it has seen, so it never reads an older one.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from factories import backbone_manifest_json, write_adapter, write_backbone
from live import assert_consistent, at_once, live_harness, statuses
from support.fleet import PostgresUnavailable, Seeded, fresh_pg_database
from support.long_polls import poll_in_thread

from registry.client import RegistryClient
from registry.launcher import embedded_registry, registry_processes

ROUNDS = 25


@pytest.fixture
def pg_database() -> Iterator[str]:
    try:
        with fresh_pg_database("weact_cache") as url:
            yield url
    except PostgresUnavailable as exc:
        pytest.skip(f"PostgreSQL unavailable: {exc}")


def _one_connection_per_request(url: str, token: str) -> RegistryClient:
    """A client whose every request opens a new connection: any worker may accept it."""
    return RegistryClient(
        url, token, transport=httpx.HTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))
    )


def _promote_and_read_rounds(world: Seeded, ids: list[int], reader: RegistryClient) -> int:
    """Promote through `world` then read through `reader` (same client state), ROUNDS times;
    returns how many plain reads (no client state) were stale, for the record."""
    plain = httpx.Client(headers={"Authorization": f"Bearer {world.tokens['reader']}"})
    stale = 0
    world.promote("prod", {"write": ids[-1]})
    try:
        for i in range(ROUNDS):
            reader.get_channel("prod")  # the reading process caches the current head
            promoted = world.promote("prod", {"write": ids[i % len(ids)]})
            assert reader.get_channel("prod")["revision"] == promoted
            stale += plain.get(f"{reader.url}/v1/channels/prod").json()["revision"] < promoted
    finally:
        plain.close()
    return stale


def _publish(world: Seeded, tmp: Path, count: int) -> list[int]:
    return [
        world.publish(write_adapter(tmp / f"write-{i}", seed=i), "write")["id"]
        for i in range(count)
    ]


@pytest.mark.postgres
def test_no_stale_read_after_a_write_on_another_process(pg_database: str, tmp_path: Path) -> None:
    backbone = backbone_manifest_json(write_backbone(tmp_path / "backbone"))
    with registry_processes(tmp_path, 2, pg_database, str(tmp_path / "blobs")) as (a, b):
        world = Seeded.create(a, backbone, ["write"])
        ids = _publish(world, tmp_path, 3)
        reader = world.client("reader", b.url)
        reader.seen = world.approver.seen  # one client, two processes behind a balancer
        stale = _promote_and_read_rounds(world, ids, reader)
        sys.stderr.write(f"plain reads that were stale: {stale}/{ROUNDS}\n")

        before = reader.get_channel("prod")
        rolled = world.rollback("prod", before["revision"] - 1)
        assert reader.get_channel("prod")["revision"] == rolled
        head = reader.get_channel("prod")
        serving = head["library"]["write"]["adapter_id"]
        world.revoke(serving)
        after = reader.get_channel("prod")
        assert after["revision"] == head["revision"] + 1
        assert after["library"] == {}
        # once the notification arrived, every client reads the new head from memory
        assert world.client("reader", b.url).get_channel("prod")["revision"] == after["revision"]
        world.close()


@pytest.mark.postgres
def test_no_stale_read_across_workers_of_one_server(pg_database: str, tmp_path: Path) -> None:
    backbone = backbone_manifest_json(write_backbone(tmp_path / "backbone"))
    with embedded_registry(tmp_path, pg_database, str(tmp_path / "blobs"), workers=2) as server:
        world = Seeded.create(server, backbone, ["write"])
        ids = _publish(world, tmp_path, 2)
        reader = _one_connection_per_request(server.url, world.tokens["reader"])
        reader.seen = world.approver.seen
        _promote_and_read_rounds(world, ids, reader)
        world.close()


def test_sqlite_workers_serve_reads_and_take_writes_one_at_a_time(tmp_path: Path) -> None:
    backbone = backbone_manifest_json(write_backbone(tmp_path / "backbone"))
    with embedded_registry(tmp_path, workers=2) as server:
        world = Seeded.create(server, backbone, ["write"])
        ids = _publish(world, tmp_path, 6)
        first = world.promote("prod", {"write": ids[0]})
        reader = _one_connection_per_request(server.url, world.tokens["reader"])
        reader.seen = world.approver.seen
        approvers = [
            _one_connection_per_request(server.url, world.tokens["approver"]) for _ in ids[1:]
        ]

        def promote(i: int) -> httpx.Response:
            body = {"adapters": {"write": ids[i + 1]}}
            return httpx.post(
                f"{server.url}/v1/channels/prod/promote",
                json=body,
                headers={"Authorization": f"Bearer {world.tokens['approver']}"},
                timeout=60,
            )

        answers = at_once(promote, threads=len(approvers))
        assert statuses(answers) == [201] * len(approvers)
        numbers = sorted(r.json()["revision"]["revision"] for r in answers)  # type: ignore[union-attr]
        assert numbers == list(range(first + 1, first + 1 + len(approvers)))
        for _ in range(10):  # whichever worker answers has seen the last commit
            assert reader.get_channel("prod")["revision"] == numbers[-1]
        with live_harness(server, tmp_path) as api:
            assert_consistent(api)
        for client in approvers:
            client.close()

        # long-polls on any worker wake on a promotion through any worker (interval poll)
        for i in range(2):
            (thread, out) = poll_in_thread(server.url, world.tokens["reader"], numbers[-1] + i, 30)
            time.sleep(0.3)
            promoted = world.promote("prod", {"write": ids[i]})
            thread.join(30)
            ((response, waited),) = out
            assert (response.status_code, response.json()["revision"]) == (200, promoted)
            assert waited < 10
        # a stop ends the open long-polls of every worker at once
        polls = [poll_in_thread(server.url, world.tokens["reader"], promoted, 55) for _ in range(4)]
        time.sleep(0.5)
        start = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=30)
        assert time.monotonic() - start < 15
        for thread, out in polls:
            thread.join(10)
            ((response, _),) = out
            assert response.status_code == 304
        world.close()
