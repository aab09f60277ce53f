"""Engines and sessions: one session per operation, opened by a context manager.

SQLite runs in WAL mode with foreign keys on; write sessions start with ``BEGIN IMMEDIATE``
so there is exactly one writer at a time (the audit chain and version numbers rely on it).
On PostgreSQL, writers serialise where needed with row locks (``SELECT ... FOR UPDATE``),
conditional updates and transaction-scoped advisory locks.

Database errors that mean "another writer got there first" are translated here, at the
boundary, so that no race ever surfaces as a 500: a unique or foreign-key violation that a
service did not handle itself, a deadlock or a serialization failure become
``ConflictError`` (409, retry the request).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import DataError, IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from registry.errors import ConflictError, InvalidError

_WRITE_OPTION = "weact_write"
# PostgreSQL SQLSTATEs of a transaction that lost a race: retrying it is the remedy.
_RETRYABLE_STATES = {"40001", "40P01", "55P03"}


def _prepare_sqlite_dir(url: str) -> None:
    database = make_url(url).database
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).parent.mkdir(parents=True, exist_ok=True)


def _install_sqlite_hooks(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(_WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _lost_race(exc: OperationalError) -> bool:
    """A deadlock, serialization failure or busy lock (PostgreSQL or SQLite)."""
    state = getattr(exc.orig, "sqlstate", None)
    return state in _RETRYABLE_STATES or "database is locked" in str(exc.orig)


def make_engine(database_url: str, **kwargs: Any) -> Engine:
    """An engine for ``database_url`` (sqlite:/// or postgresql+psycopg://)."""
    if database_url.startswith("sqlite"):
        _prepare_sqlite_dir(database_url)
        engine = create_engine(
            database_url, connect_args={"check_same_thread": False, "timeout": 30}, **kwargs
        )
        _install_sqlite_hooks(engine)
        return engine
    return create_engine(database_url, pool_pre_ping=True, **kwargs)


class Database:
    """An engine plus a session factory; ``read()`` and ``write()`` open one transaction."""

    def __init__(self, database_url: str, **engine_kwargs: Any) -> None:
        self.url = database_url
        self.engine = make_engine(database_url, **engine_kwargs)
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        self._factory = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self, *, write: bool = False) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on error."""
        with self._factory() as session:
            session.connection(execution_options={_WRITE_OPTION: write})
            try:
                yield session
                session.commit()
            except DataError as exc:
                session.rollback()
                raise InvalidError(f"value not accepted by the database: {exc.orig}") from exc
            except IntegrityError as exc:
                session.rollback()
                raise ConflictError(
                    f"a concurrent write conflicts with this one; retry the request ({exc.orig})"
                ) from exc
            except OperationalError as exc:
                session.rollback()
                if not _lost_race(exc):
                    raise
                raise ConflictError(
                    f"the database aborted this write in favour of a concurrent one; "
                    f"retry the request ({exc.orig})"
                ) from exc
            except BaseException:
                session.rollback()
                raise

    def read(self) -> AbstractContextManager[Session]:
        return self.session(write=False)

    def write(self) -> AbstractContextManager[Session]:
        return self.session(write=True)

    def dispose(self) -> None:
        self.engine.dispose()


@contextmanager
def session_scope(database_url: str, *, write: bool = True) -> Iterator[Session]:
    """A one-off session on ``database_url`` (used by ``weact token create``)."""
    database = Database(database_url)
    try:
        with database.session(write=write) as session:
            yield session
    finally:
        database.dispose()
