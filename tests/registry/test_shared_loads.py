"""Concurrent cache misses read once (`SharedLoads`): the token reads of a wake's re-polls."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import httpx
import pytest
from harness import Harness

from registry.api.shared_loads import SharedLoads


def _counting_load() -> tuple[list[int], Callable[[], Awaitable[int]]]:
    calls: list[int] = []

    async def load() -> int:
        calls.append(1)
        number = len(calls)
        await asyncio.sleep(0.05)
        return number

    return calls, load


def test_callers_of_one_key_and_stamp_share_one_load_and_nothing_is_kept() -> None:
    async def main() -> tuple[set[int], int, int]:
        loads, (calls, load) = SharedLoads(), _counting_load()
        results = await asyncio.gather(*(loads.load("token", 7, load) for _ in range(100)))
        return set(results), len(calls), loads.in_flight

    assert asyncio.run(main()) == ({1}, 1, 0)


def test_a_caller_with_a_moved_stamp_does_not_join_an_older_load() -> None:
    async def main() -> tuple[int, int, int]:
        loads, (calls, load) = SharedLoads(), _counting_load()
        before = asyncio.ensure_future(loads.load("token", 1, load))
        await asyncio.sleep(0)  # the first load is in flight
        after = await loads.load("token", 2, load)  # a revoke moved the stamp meanwhile
        return await before, after, len(calls)

    assert asyncio.run(main()) == (1, 2, 2)


def test_without_a_stamp_every_caller_loads() -> None:
    async def main() -> int:
        loads, (calls, load) = SharedLoads(), _counting_load()
        await asyncio.gather(*(loads.load("token", None, load) for _ in range(5)))
        return len(calls)

    assert asyncio.run(main()) == 5


def test_a_failed_load_fails_its_callers_and_the_next_caller_loads_again() -> None:
    async def main() -> int:
        loads, calls = SharedLoads(), 0

        async def load() -> int:
            nonlocal calls
            calls += 1
            await asyncio.sleep(0.01)
            if calls == 1:
                raise PermissionError("unknown token")
            return calls

        results = await asyncio.gather(
            *(loads.load("token", 1, load) for _ in range(3)), return_exceptions=True
        )
        assert all(isinstance(r, PermissionError) for r in results)
        return await loads.load("token", 1, load)

    assert asyncio.run(main()) == 2


def test_a_caller_that_goes_away_leaves_the_load_to_the_others() -> None:
    async def main() -> tuple[int, int]:
        loads, (calls, load) = SharedLoads(), _counting_load()
        gone = asyncio.ensure_future(loads.load("token", 1, load))
        stays = asyncio.ensure_future(loads.load("token", 1, load))
        await asyncio.sleep(0)
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        return await stays, len(calls)

    assert asyncio.run(main()) == (1, 1)


def test_requests_that_miss_the_token_cache_together_read_the_token_once(
    sqlite_api: Harness,
) -> None:
    """The re-polls of one wake come back together after the 1 s token TTL: one read."""
    app = sqlite_api.client.app
    state = app.state.weact  # type: ignore[attr-defined]
    reads = 0
    authenticate = state.tokens.authenticate

    def counted(token: str | None) -> object:
        nonlocal reads
        reads += 1
        time.sleep(0.05)  # the others arrive while it reads
        return authenticate(token)

    state.tokens.authenticate = counted
    state.token_changes.wake()  # whatever was cached is stale now

    async def main() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://registry") as client:
            answers = await asyncio.gather(
                *(client.get("/v1/channels", headers=sqlite_api.auth("reader")) for _ in range(20))
            )
        return [answer.status_code for answer in answers]

    assert asyncio.run(main()) == [200] * 20
    assert reads == 1
