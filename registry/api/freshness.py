"""The stamp that tells the in-process read caches (`registry.services.reads`) whether
anything may have changed since an entry was loaded.

- PostgreSQL: the generation of the `ChannelNotifier`, which every promote, rollback and
  revoke of every registry process on the database moves (through `registry.api.pgbus`),
  while the listener is connected; None (no caching) while it is not.
- SQLite: `PRAGMA data_version` of a connection of its own (`registry.db.changes`), which
  every commit of every worker on the file moves, with this process's wakes.
- an in-memory SQLite database: None (nothing is cached).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from registry.api.notify import ChannelNotifier
from registry.db.changes import sqlite_changes
from registry.db.session import Database

Stamp = Callable[[], Hashable | None]


def change_stamp(db: Database, notifier: ChannelNotifier) -> tuple[Stamp, Callable[[], None]]:
    """The stamp for `db` and a function that releases what it holds."""
    if not db.is_sqlite:

        def notified() -> Hashable | None:
            return notifier.generation if notifier.cross_process else None

        return notified, lambda: None
    changes = sqlite_changes(db.engine)
    if changes is None:
        return lambda: None, lambda: None

    def committed() -> Hashable | None:
        return (notifier.generation, changes.version())

    return committed, changes.close
