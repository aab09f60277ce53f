"""A cheap "did anything commit?" check on a SQLite database, for in-process read caches.

SQLite has no notifications, but ``PRAGMA data_version`` on a connection changes whenever
another connection (of this process or of any other one) committed to the file since the
connection last asked: about 10 microseconds, no table read. `SqliteChanges` holds one such
connection that never writes, so every commit of every registry worker on the file moves
its number.

    changes = sqlite_changes(engine)  # None for PostgreSQL or an in-memory database
    before = changes.version(); ...; changes.version() != before  # something committed
"""

from __future__ import annotations

import sqlite3
import threading

from sqlalchemy import Engine


class SqliteChanges:
    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None  # opened on first use

    def version(self) -> int:
        """A number that differs from the last one read whenever a commit happened."""
        with self._lock:
            if self._connection is None:
                self._connection = sqlite3.connect(
                    self.path, check_same_thread=False, isolation_level=None, timeout=30
                )
            row = self._connection.execute("PRAGMA data_version").fetchone()
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


def sqlite_changes(engine: Engine) -> SqliteChanges | None:
    """The change check for the engine's SQLite file; None for anything else."""
    if engine.dialect.name != "sqlite":
        return None
    path = engine.url.database
    if not path or path == ":memory:" or path.startswith("file:"):
        return None
    return SqliteChanges(path)
