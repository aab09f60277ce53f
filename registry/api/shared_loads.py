"""One load for the requests that miss a cache together.

A cache entry expires for every request at once: the token cache keeps a principal 1 s
(`token_cache_ttl_s`), and the long-polls that one promotion wakes all come back within
that second. Those that share a token (replicas, followers with one reader token) would
each read it from the database on a threadpool thread of its own: with 1,000 of them,
1,000 reads and threadpool hops per promotion, contending with the event loop that answers
the wakes (bench/bench_fleet.py). Followers with a token each still read theirs once each.

`SharedLoads.load(key, stamp, load)` runs `load()` once for the callers of one `key` under
one `stamp` while it is in flight. A caller whose stamp differs (a write moved it since the
load began) starts a load of its own, so that nobody is answered from a read older than a
change it could know of: the guarantee of the stamped caches (`registry.services.read_cache`).
Without a stamp (no trusted change counter) every caller loads. A load that is done is not
kept: what stays is only what is in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from functools import partial
from typing import Any, TypeVar

T = TypeVar("T")
_Entry = tuple[Hashable, "asyncio.Future[Any]"]  # (stamp, the load)


class SharedLoads:
    """Loads in flight, by key; shared by the callers that come with the same stamp."""

    def __init__(self) -> None:
        self._loads: dict[Hashable, _Entry] = {}

    async def load(
        self, key: Hashable, stamp: Hashable | None, load: Callable[[], Awaitable[T]]
    ) -> T:
        """`await load()`, or the result of the one that is running for `key` and `stamp`."""
        if stamp is None:
            return await load()
        entry = self._loads.get(key)
        if entry is None or entry[0] != stamp:
            entry = (stamp, asyncio.ensure_future(load()))
            self._loads[key] = entry
            entry[1].add_done_callback(partial(self._done, key, entry))
        result: T = await asyncio.shield(entry[1])  # a caller that goes away cancels no load
        return result

    def _done(self, key: Hashable, entry: _Entry, future: asyncio.Future[Any]) -> None:
        if self._loads.get(key) is entry:
            del self._loads[key]
        if not future.cancelled():
            future.exception()  # retrieved: every caller may have gone away

    @property
    def in_flight(self) -> int:
        return len(self._loads)
