"""Reads served from memory: each channel's current revision and each bearer token.

A channel changes only on promote, rollback and revoke, yet every node and client resolves
it on every request. `ChannelReads` keeps the current revision of each channel (and its
rendered body and ETag) in the process; `TokenReads` the principal behind each token seen.

An entry is served only while the **stamp** it was loaded under is still the current one
and it is younger than `ttl_s`. The stamp comes from the caller (`registry.api.freshness`):
a counter that every write of any registry process moves (PostgreSQL: the LISTEN/NOTIFY
wakes of `ChannelNotifier` for channels, of the token `Changes` for tokens; SQLite:
`PRAGMA data_version`), or None while no such counter
can be trusted (the listener reconnecting): then every read goes to the database. The stamp
is taken *before* the database read, so a write that commits during a load makes the entry
stale at once. The TTL bounds what a lost notification could cost.

Another process's promotion reaches this one a notification later; a client that already
saw the new revision passes it as `min_revision` and is answered from the database when
the entry is older: a client never reads a revision older than one it has seen.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from registry.auth import hash_token
from registry.db.session import Database
from registry.domain import Principal, Revision
from registry.services.revisions import get_revision
from registry.services.tokens import authenticate

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

Stamp = Callable[[], Hashable | None]
MAX_ENTRIES = 4096


class StampedCache(Generic[K, V]):
    """Values valid while the stamp they were loaded under is current and `ttl_s` young."""

    def __init__(self, stamp: Stamp, ttl_s: float, max_entries: int = MAX_ENTRIES) -> None:
        self.stamp = stamp
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: dict[K, tuple[Hashable, float, V]] = {}

    def get(self, key: K) -> V | None:
        if self.ttl_s <= 0:
            return None
        entry = self._entries.get(key)
        if entry is None:
            return None
        stamp = self.stamp()
        if stamp is None or entry[0] != stamp or time.monotonic() - entry[1] > self.ttl_s:
            return None
        return entry[2]

    def load(self, key: K, read: Callable[[], V]) -> V:
        """`read()` (the database), remembered under the stamp taken before it ran."""
        stamp = self.stamp() if self.ttl_s > 0 else None
        loaded_at = time.monotonic()
        value = read()
        if stamp is not None:
            with self._lock:
                if len(self._entries) >= self.max_entries and key not in self._entries:
                    self._entries.clear()  # a flood of names: start over, never grow
                self._entries[key] = (stamp, loaded_at, value)
        return value


def etag_of(channel: str, revision: int) -> str:
    return f'"{channel}:{revision}"'


def revisions_named(channel: str, etags: str | None) -> int:
    """The highest revision of `channel` an If-None-Match header names (0 for none)."""
    highest = 0
    for tag in (etags or "").split(","):
        name, _, number = tag.strip().removeprefix("W/").strip('"').rpartition(":")
        if name == channel and number.isdigit():
            highest = max(highest, int(number))
    return highest


@dataclass(frozen=True)
class ChannelHead:
    """A channel's current revision, rendered once for every read that it answers."""

    revision: Revision
    etag: str
    body: bytes


class ChannelReads:
    """The current revision of each channel, from memory when it is known to be current."""

    def __init__(
        self, db: Database, stamp: Stamp, render: Callable[[Revision], bytes], ttl_s: float
    ) -> None:
        self.db = db
        self.render = render
        self._cache: StampedCache[str, ChannelHead] = StampedCache(stamp, ttl_s)

    def cached(self, channel: str, min_revision: int = 0) -> ChannelHead | None:
        """The head from memory, if current and not older than `min_revision`; else None."""
        head = self._cache.get(channel)
        if head is None or head.revision.revision < min_revision:
            return None
        return head

    def read(self, channel: str) -> ChannelHead:
        """The head from the database (`NotFoundError` without a revision); remembered."""
        return self._cache.load(channel, lambda: self._read(channel))

    def _read(self, channel: str) -> ChannelHead:
        with self.db.read() as session:
            revision = get_revision(session=session, channel=channel)
        return ChannelHead(revision, etag_of(channel, revision.revision), self.render(revision))


class TokenReads:
    """The principal behind each valid bearer token (an unknown token is never cached)."""

    def __init__(self, db: Database, stamp: Stamp, ttl_s: float) -> None:
        self.db = db
        self._cache: StampedCache[str, Principal] = StampedCache(stamp, ttl_s)

    def cached(self, token: str | None) -> Principal | None:
        return self._cache.get(hash_token(token)) if token else None

    def stamp(self) -> Hashable | None:
        """The stamp a load now would be remembered under (None: it would not be)."""
        return self._cache.stamp() if self._cache.ttl_s > 0 else None

    def authenticate(self, token: str | None) -> Principal:
        """`tokens.authenticate` in a read transaction; `UnauthorizedError` as it raises."""
        if not token:
            return self._authenticate(token)
        return self._cache.load(hash_token(token), lambda: self._authenticate(token))

    def _authenticate(self, token: str | None) -> Principal:
        with self.db.read() as session:
            return authenticate(session=session, token=token)
