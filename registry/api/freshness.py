"""The stamps that tell the in-process read caches (`registry.services.read_cache`) whether
anything they hold may have changed since an entry was loaded: one for channel heads, one for
tokens, so that a token revoke drops cached tokens without waking any channel long-poll.

- PostgreSQL: the generation of the `ChannelNotifier` (channel heads), which every promote,
  rollback and adapter revoke of every registry process on the database moves, and that of
  the token `Changes` (tokens), which every token revoke moves (both through
  `registry.api.pgbus`), while the listener is connected; None (no caching) while it is not.
- SQLite: `PRAGMA data_version` of a connection of its own (`registry.db.changes`), which
  every commit of every worker on the file moves, with this process's wakes.
- an in-memory SQLite database: None (nothing is cached).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

from registry.api.notify import Changes, ChannelNotifier
from registry.db.changes import sqlite_changes
from registry.db.session import Database

Stamp = Callable[[], Hashable | None]


def _never() -> None:
    return None


@dataclass(frozen=True)
class Stamps:
    channels: Stamp
    tokens: Stamp
    release: Callable[[], None]  # what the stamps hold (a SQLite connection)


def change_stamps(db: Database, notifier: ChannelNotifier, tokens: Changes) -> Stamps:
    """The stamps for `db`: channel heads moved by `notifier`, tokens by `tokens`."""
    if not db.is_sqlite:
        return Stamps(_notified(notifier), _notified(tokens), _never)
    changes = sqlite_changes(db.engine)
    if changes is None:
        return Stamps(_never, _never, _never)

    def committed(moved: Changes) -> Stamp:
        return lambda: (moved.generation, changes.version())

    return Stamps(committed(notifier), committed(tokens), changes.close)


def _notified(moved: Changes) -> Stamp:
    return lambda: moved.generation if moved.cross_process else None
