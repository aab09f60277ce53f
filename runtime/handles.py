"""Episode handles: how a stateless MCP client (revision 2026-07-28) names its episode.

The 2026-07-28 revision has no protocol sessions: state that spans calls travels in a handle
the server mints and the client passes back as an ordinary tool argument. A handle here is a
256-bit secret (`secrets.token_urlsafe`), so it cannot be guessed from episode ids or from
other handles. The table keeps only its sha256 (like tokens at rest), the episode it opens,
the credentials that opened it (`owner`, a digest of the bearer token) and when it was last
used. A handle presented with other credentials is refused; one idle for longer than
`idle_s` expires, and the episode behind it is closed by its manager.

    handles = HandleTable(idle_s=600)
    secret = handles.mint("episode-id", owner=owner_of("Bearer t0k"))
    handles.resolve(secret, owner=owner_of("Bearer t0k"))  # -> "episode-id"
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from runtime.errors import ForeignHandleError, UnknownHandleError

HANDLE_BYTES = 32  # 256 bits of randomness per handle
DEFAULT_IDLE_S = 900.0


def owner_of(credentials: str | None) -> str:
    """A stable, non-secret name for the credentials of a request ("" for none)."""
    if not credentials:
        return ""
    return hashlib.sha256(credentials.encode()).hexdigest()


def _digest(handle: str) -> str:
    return hashlib.sha256(handle.encode()).hexdigest()


@dataclass
class _Entry:
    episode_id: str
    owner: str
    last_used: float


class HandleTable:
    """Handle digest -> (episode, owner, last use); thread-safe."""

    def __init__(
        self, idle_s: float = DEFAULT_IDLE_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if idle_s <= 0:
            raise ValueError(f"idle_s must be positive, got {idle_s}")
        self.idle_s = idle_s
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def mint(self, episode_id: str, *, owner: str) -> str:
        """A new secret handle for `episode_id`, usable only with `owner`'s credentials."""
        handle = secrets.token_urlsafe(HANDLE_BYTES)
        with self._lock:
            self._entries[_digest(handle)] = _Entry(episode_id, owner, self._clock())
        return handle

    def resolve(self, handle: str, *, owner: str) -> str:
        """The episode id of `handle`, refreshing its idle timer; raises HandleError."""
        with self._lock:
            entry = self._live(handle)
            if not secrets.compare_digest(entry.owner, owner):
                raise ForeignHandleError()
            entry.last_used = self._clock()
            return entry.episode_id

    def revoke(self, handle: str, *, owner: str) -> str:
        """Forget `handle` (after the same checks as `resolve`); returns its episode id."""
        episode_id = self.resolve(handle, owner=owner)
        with self._lock:
            self._entries.pop(_digest(handle), None)
        return episode_id

    def expire(self) -> list[str]:
        """Forget every handle idle for longer than `idle_s`; returns their episode ids."""
        now = self._clock()
        with self._lock:
            stale = [k for k, e in self._entries.items() if now - e.last_used > self.idle_s]
            return [self._entries.pop(k).episode_id for k in stale]

    def forget_episode(self, episode_id: str) -> None:
        """Drop the handles of an episode closed by other means."""
        with self._lock:
            for key in [k for k, e in self._entries.items() if e.episode_id == episode_id]:
                del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)

    def _live(self, handle: str) -> _Entry:
        entry = self._entries.get(_digest(handle))
        if entry is None or self._clock() - entry.last_used > self.idle_s:
            raise UnknownHandleError()
        return entry
