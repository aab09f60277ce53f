"""Wakes long-polling requests in this process as soon as a channel gets a revision.

Requests on other processes are covered by polling the database at a short interval;
this only removes the wait when the writer runs in the same process.
"""

from __future__ import annotations

import asyncio
import threading


class ChannelNotifier:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    def notify(self) -> None:
        """Wake every waiter (callable from any thread)."""
        with self._lock:
            waiters = list(self._waiters)
        for loop, event in waiters:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # the loop closed meanwhile
                pass

    async def wait(self, timeout: float) -> None:
        """Return after a notify or after ``timeout`` seconds, whichever comes first."""
        entry = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._waiters.add(entry)
        try:
            await asyncio.wait_for(entry[1].wait(), timeout)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                self._waiters.discard(entry)
