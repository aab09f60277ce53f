"""Wakes long-polling requests as soon as a channel gets a revision; counts token changes.

`Changes` is a generation that one kind of write moves: a write in this process calls
`notify()`, which moves it here at once and hands the news to a cross-process bus when one
is attached (`registry.api.pgbus`: PostgreSQL LISTEN/NOTIFY). The bus calls `wake()` when
another process wrote, and sets `cross_process` while it delivers them. The read caches take
their stamps from these generations (`registry.api.freshness`); token revocations have a
`Changes` of their own, so that they drop cached tokens without waking any long-poll.

`ChannelNotifier` is the `Changes` of channels, whose `wake()` also wakes this process's
waiters. While `cross_process` is true, a long-poll sleeps until woken; without a bus
(SQLite) or while the bus is reconnecting, it re-reads the database every interval.

Waiters pass the `generation` they saw before reading the database, so a wake that lands
between that read and the wait is never lost. `shared()` lets the waiters one wake releases
share one read of the database. `close()` (the server is stopping) wakes every
waiter for good: open long-polls answer at once instead of holding the shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Changes:
    """A generation that one kind of write moves, in this process and through the bus."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation = 0
        self.publish: Callable[[], None] | None = None  # tells other processes (a bus)
        self.cross_process = False  # whether the bus delivers other processes' writes now

    @property
    def generation(self) -> int:
        """Counts wakes; a stamp taken before a read is stale once it moved."""
        return self._generation

    def notify(self) -> None:
        """A write happened here: wake this process, then tell the others."""
        self.wake()
        if self.publish is not None:
            try:
                self.publish()
            except Exception:  # the write is done; other processes catch up (poll, TTL)
                logger.exception("could not publish a change notification")

    def wake(self) -> None:
        """Another process wrote (or this one did): move the generation."""
        with self._lock:
            self._generation += 1


def _set_all(events: list[asyncio.Event]) -> None:
    for event in events:
        event.set()


class ChannelNotifier(Changes):
    def __init__(self) -> None:
        super().__init__()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._closed = False
        self._shared: dict[str, tuple[int, asyncio.Future[Any]]] = {}

    @property
    def closed(self) -> bool:
        return self._closed

    def wake(self) -> None:
        """Wake every waiter of this process (callable from any thread): one call into each
        event loop, which sets its waiters' events, not one call (and one write to the
        loop's self-pipe) per waiter."""
        with self._lock:
            self._generation += 1
            by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Event]] = {}
            for loop, event in self._waiters:
                by_loop.setdefault(loop, []).append(event)
        for loop, events in by_loop.items():
            try:
                loop.call_soon_threadsafe(_set_all, events)
            except RuntimeError:  # the loop closed meanwhile
                pass

    def close(self) -> None:
        """The server is stopping: wake every waiter now and let no new one sleep."""
        self._closed = True
        self.wake()

    async def wait(self, timeout: float, since: int | None = None) -> None:
        """Return after a wake or after `timeout` seconds, whichever comes first.

        With `since`, return at once when a wake happened after that generation.
        """
        entry = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            if self._closed or (since is not None and since != self._generation):
                return
            self._waiters.add(entry)
        try:
            await asyncio.wait_for(entry[1].wait(), timeout)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                self._waiters.discard(entry)

    async def shared(self, key: str, load: Callable[[], Awaitable[T]]) -> T:
        """`await load()`, one load shared by every caller of `key` until the next wake.

        Sound only while every write wakes this notifier (`cross_process`): the long-polls
        that one promotion wakes then read the database once, not once each.
        """
        generation = self._generation  # before the load: a write during it makes it stale
        entry = self._shared.get(key)
        if entry is None or entry[0] != generation:
            entry = (generation, asyncio.ensure_future(load()))
            self._shared[key] = entry
        try:
            return await asyncio.shield(entry[1])  # a waiter that goes away cancels no load
        except Exception:
            if self._shared.get(key) is entry:
                del self._shared[key]  # a failed load is not shared with later callers
            raise

    @property
    def waiting(self) -> int:
        """How many requests wait right now (a metric)."""
        return len(self._waiters)
