"""Channel notifications: long-polls woken across registry processes, and ended on shutdown;
token revokes heard by every process without waking a long-poll."""

from __future__ import annotations

import asyncio
import re
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from factories import backbone_manifest_json, write_adapter, write_backbone
from sqlalchemy import create_engine, text
from support.fleet import (
    PostgresUnavailable,
    Seeded,
    fresh_pg_database,
)
from support.long_polls import poll_in_thread, wait_for_polls

from registry.api.notify import ChannelNotifier
from registry.launcher import EmbeddedRegistry, embedded_registry, registry_processes

# -- the in-process notifier -------------------------------------------------------------


def test_a_wake_between_read_and_wait_is_not_lost() -> None:
    async def main() -> float:
        notifier = ChannelNotifier()
        seen = notifier.generation
        notifier.wake()  # lands after the waiter read the database, before it waits
        start = time.monotonic()
        await notifier.wait(30, since=seen)
        return time.monotonic() - start

    assert asyncio.run(main()) < 1


def test_close_wakes_waiters_and_no_new_one_sleeps() -> None:
    async def main() -> tuple[float, float]:
        notifier = ChannelNotifier()
        start = time.monotonic()
        waiter = asyncio.ensure_future(notifier.wait(30))
        await asyncio.sleep(0.05)
        notifier.close()
        await waiter
        woken = time.monotonic() - start
        start = time.monotonic()
        await notifier.wait(30)
        return woken, time.monotonic() - start

    woken, later = asyncio.run(main())
    assert woken < 1
    assert later < 1


def test_a_failing_publish_still_wakes_this_process() -> None:
    async def main() -> int:
        notifier = ChannelNotifier()

        def broken() -> None:
            raise OSError("bus down")

        notifier.publish = broken
        seen = notifier.generation
        notifier.notify()
        return notifier.generation - seen

    assert asyncio.run(main()) == 1


def test_a_wake_from_another_thread_releases_every_waiter() -> None:
    async def main() -> tuple[int, float]:
        notifier = ChannelNotifier()
        waiters = [asyncio.ensure_future(notifier.wait(30)) for _ in range(500)]
        while notifier.waiting < len(waiters):
            await asyncio.sleep(0.01)
        start = time.monotonic()
        await asyncio.to_thread(notifier.wake)  # as a sync route or the bus's thread does
        await asyncio.gather(*waiters)
        return notifier.waiting, time.monotonic() - start

    waiting, took = asyncio.run(main())
    assert waiting == 0
    assert took < 5


def test_waiters_share_one_load_until_the_next_wake() -> None:
    async def main() -> tuple[list[int], list[int], int]:
        notifier = ChannelNotifier()
        loads = 0

        async def load() -> int:
            nonlocal loads
            loads += 1
            await asyncio.sleep(0.05)
            return loads

        first = await asyncio.gather(*(notifier.shared("prod", load) for _ in range(50)))
        notifier.wake()
        second = await asyncio.gather(*(notifier.shared("prod", load) for _ in range(50)))
        return first, second, loads

    first, second, loads = asyncio.run(main())
    assert (set(first), set(second), loads) == ({1}, {2}, 2)


def test_a_failed_load_is_not_shared_with_later_callers() -> None:
    async def main() -> int:
        notifier = ChannelNotifier()
        calls = 0

        async def load() -> int:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise LookupError("no channel yet")
            return calls

        with pytest.raises(LookupError):
            await notifier.shared("prod", load)
        return await notifier.shared("prod", load)

    assert asyncio.run(main()) == 2


# -- several registry processes on one PostgreSQL database --------------------------------


@pytest.fixture
def pg_database() -> Iterator[str]:
    try:
        with fresh_pg_database("weact_notify") as url:
            yield url
    except PostgresUnavailable as exc:
        pytest.skip(f"PostgreSQL unavailable: {exc}")


@dataclass
class Pair:
    """Two registry processes on one database, versions of `write` published through `a`."""

    a: EmbeddedRegistry
    b: EmbeddedRegistry
    world: Seeded  # through a
    ids: list[int]
    first: int  # the revision of prod that ids[0] was promoted in


@contextmanager
def two_processes(tmp_path: Path, pg_database: str, versions: int) -> Iterator[Pair]:
    backbone = write_backbone(tmp_path / "backbone")
    directories = [write_adapter(tmp_path / f"write-{i}", seed=i) for i in range(versions)]
    with registry_processes(tmp_path, 2, pg_database, str(tmp_path / "blobs")) as (a, b):
        world = Seeded.create(a, backbone_manifest_json(backbone), ["write"])
        ids = [world.publish(d, "write")["id"] for d in directories]
        yield Pair(a, b, world, ids, world.promote("prod", {"write": ids[0]}))
        world.close()


@pytest.mark.postgres
def test_a_promotion_on_one_process_wakes_long_polls_on_the_other(
    pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With database polling every 60 s, only LISTEN/NOTIFY can wake the other process."""
    monkeypatch.setenv("WEACT_LONG_POLL_INTERVAL_S", "60")
    with two_processes(tmp_path, pg_database, 3) as pair:
        world, b = pair.world, pair.b
        reader = world.tokens["reader"]

        thread, out = poll_in_thread(b.url, reader, after=pair.first, wait=50)
        wait_for_polls(b.url, 1, world.tokens["reader"])  # the poll is waiting on b
        second = world.promote("prod", {"write": pair.ids[1]})
        thread.join(20)
        ((response, _),) = out
        assert response.status_code == 200
        assert response.json()["revision"] == second

        # the listener of b loses its connection: it reconnects and hears the next promotion
        killer = create_engine(pg_database)
        with killer.connect() as c:
            killed = c.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND query LIKE 'LISTEN%'"
                )
            ).scalar()
        killer.dispose()
        assert killed == 2  # one listener per registry process
        time.sleep(1.0)
        thread, out = poll_in_thread(b.url, reader, after=second, wait=50)
        wait_for_polls(b.url, 1, world.tokens["reader"])
        third = world.promote("prod", {"write": pair.ids[2]})
        thread.join(20)
        ((response, _),) = out
        assert response.status_code == 200
        assert response.json()["revision"] == third


def channel_wakes(url: str, token: str) -> float:
    """The server's count of channel notifications heard (its `weact_channel_wakes`)."""
    scraped = httpx.get(f"{url}/v1/metrics", headers={"Authorization": f"Bearer {token}"})
    found = re.search(r"^weact_channel_wakes (\S+)$", scraped.text, re.M)
    assert found is not None
    return float(found.group(1))


def bearer(token: dict) -> dict[str, str]:
    return {"Authorization": f"Bearer {token['token']}"}


def revoke_through(world: Seeded, token: dict, other: str) -> None:
    """Revoke `token` through `world`'s process; return once `other` refuses it."""
    world.admin.revoke_token(token["id"])
    deadline = time.monotonic() + 10
    while httpx.get(f"{other}/v1/adapters", headers=bearer(token)).status_code != 401:
        assert time.monotonic() < deadline, f"{other} still takes the revoked token"
        time.sleep(0.05)


@pytest.mark.postgres
def test_a_token_revoke_reaches_the_other_process_and_wakes_no_long_poll(
    pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With tokens cached 60 s and long-polls asleep until woken, only the revoke's own
    notification refuses the token on the other process; and it leaves the polls asleep."""
    monkeypatch.setenv("WEACT_LONG_POLL_INTERVAL_S", "60")
    monkeypatch.setenv("WEACT_TOKEN_CACHE_TTL_S", "60")
    with two_processes(tmp_path, pg_database, 2) as pair:
        world, b = pair.world, pair.b
        made = [world.admin.create_token(name=f"temp-{i}", role="reader") for i in range(2)]
        for token in made:  # cached on b now
            for _ in range(3):
                assert httpx.get(f"{b.url}/v1/adapters", headers=bearer(token)).status_code == 200

        thread, out = poll_in_thread(b.url, world.tokens["reader"], after=pair.first, wait=50)
        wait_for_polls(b.url, 1, world.tokens["reader"])
        # b hears notifications in commit order: once it refuses the first token, it has heard
        # every earlier one (the promotion's) too
        revoke_through(world, made[0], b.url)
        wakes = channel_wakes(b.url, world.tokens["reader"])
        revoke_through(world, made[1], b.url)
        assert channel_wakes(b.url, world.tokens["reader"]) == wakes
        assert thread.is_alive()
        assert not out

        second = world.promote("prod", {"write": pair.ids[1]})  # the poll still wakes on it
        thread.join(20)
        ((response, _),) = out
        assert (response.status_code, response.json()["revision"]) == (200, second)
        assert channel_wakes(b.url, world.tokens["reader"]) > wakes


def test_stopping_the_registry_ends_open_long_polls_at_once(tmp_path: Path) -> None:
    backbone = write_backbone(tmp_path / "backbone")
    with embedded_registry(tmp_path) as server:
        world = Seeded.create(server, backbone_manifest_json(backbone), ["write"])
        adapter = world.publish(write_adapter(tmp_path / "write"), "write")
        first = world.promote("prod", {"write": adapter["id"]})
        polls = [poll_in_thread(server.url, world.tokens["reader"], first, 55) for _ in range(3)]
        wait_for_polls(server.url, 3, world.tokens["reader"])
        start = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=30)
        stopped = time.monotonic() - start
        for thread, _ in polls:
            thread.join(10)
        world.close()
    assert stopped < 10  # the polls wait 55 s; before, a stop waited for them
    for _, out in polls:
        ((response, _),) = out
        assert response.status_code == 304
