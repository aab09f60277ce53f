"""Wakes long-polling requests as soon as a channel gets a revision.

`ChannelNotifier` is the in-process part: a write in this process calls `notify()`, which
wakes this process's waiters at once and hands the news to a cross-process bus when one is
attached (`registry.api.pgbus`: PostgreSQL LISTEN/NOTIFY). The bus calls `wake()` when
another process wrote. While `cross_process` is true, a long-poll sleeps until woken; without
a bus (SQLite) or while the bus is reconnecting, it re-reads the database every interval.

Waiters pass the `generation` they saw before reading the database, so a wake that lands
between that read and the wait is never lost. `close()` (the server is stopping) wakes every
waiter for good: open long-polls answer at once instead of holding the shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)


class ChannelNotifier:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._generation = 0
        self._closed = False
        self.publish: Callable[[], None] | None = None  # tells other processes (a bus)
        self.cross_process = False  # whether the bus delivers other processes' writes now

    @property
    def generation(self) -> int:
        """Counts wakes; pass it to `wait` to return at once if one happened since."""
        return self._generation

    @property
    def closed(self) -> bool:
        return self._closed

    def notify(self) -> None:
        """A revision was written here: wake this process's waiters, then tell the others."""
        self.wake()
        if self.publish is not None:
            try:
                self.publish()
            except Exception:  # the write is done; other processes catch up on their poll
                logger.exception("could not publish a channel notification")

    def wake(self) -> None:
        """Wake every waiter of this process (callable from any thread)."""
        with self._lock:
            self._generation += 1
            waiters = list(self._waiters)
        for loop, event in waiters:
            try:
                loop.call_soon_threadsafe(event.set)
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

    @property
    def waiting(self) -> int:
        """How many requests wait right now (a metric)."""
        return len(self._waiters)
