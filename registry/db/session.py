"""Engines and sessions: one session per operation, opened by a context manager.

SQLite runs in WAL mode with foreign keys on; write sessions start with ``BEGIN IMMEDIATE``
so there is exactly one writer at a time (the audit chain and version numbers rely on it).
On PostgreSQL, writers serialise where needed with row locks (``SELECT ... FOR UPDATE``),
conditional updates and transaction-scoped advisory locks.

Database errors that mean "another writer got there first" are translated here, at the
boundary, so that no race ever surfaces as a 500: a unique or foreign-key violation that a
service did not handle itself, a deadlock or a serialization failure become
``ConflictError`` (409, retry the request). A database that cannot be used right now (a
lock not granted within the busy timeout, a connection lost or refused, a pool with no
free connection) is ``RegistryUnavailableError`` (503 ``unavailable`` with
``Retry-After``): the transaction was rolled back (or, when the connection broke during
its COMMIT, its outcome is unknown: only idempotent requests are retried blindly).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import (
    DataError,
    DBAPIError,
    IntegrityError,
    InterfaceError,
    OperationalError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.orm import Session, sessionmaker

from registry.errors import ConflictError, InvalidError, RegistryUnavailableError

_WRITE_OPTION = "weact_write"
# PostgreSQL SQLSTATEs of a transaction that lost a race: retrying it is the remedy.
_RETRYABLE_STATES = {"40001", "40P01"}


def _prepare_sqlite_dir(url: str) -> None:
    database = make_url(url).database
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).parent.mkdir(parents=True, exist_ok=True)


def _install_sqlite_hooks(engine: Engine, lock_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={lock_timeout_ms}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(_WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _lost_race(exc: DBAPIError) -> bool:
    """A deadlock or serialization failure (PostgreSQL)."""
    return getattr(exc.orig, "sqlstate", None) in _RETRYABLE_STATES


# PostgreSQL SQLSTATEs of a database that cannot serve this transaction now (class 08 too):
# lock_not_available, admin/crash shutdown, cannot connect now, too many connections.
_UNAVAILABLE_STATES = {"55P03", "57P01", "57P02", "57P03", "53300"}
_SQLITE_UNAVAILABLE = ("database is locked", "database table is locked", "unable to open")


def _is_unavailable(exc: DBAPIError) -> bool:
    """A lock not granted in time or a connection lost, refused or shut down: the
    database's state, not the request's, so retrying later is the remedy. (A missing
    table, say, is not: that stays a 500.)"""
    if exc.connection_invalidated:
        return True
    state = getattr(exc.orig, "sqlstate", None)
    if state is not None:
        return state in _UNAVAILABLE_STATES or str(state).startswith("08")
    if isinstance(exc.orig, sqlite3.Error):
        return any(text in str(exc.orig) for text in _SQLITE_UNAVAILABLE)
    return True  # psycopg without a SQLSTATE: the connection itself failed


def _unavailable(exc: Exception) -> RegistryUnavailableError:
    """A lock not granted in time, a lost or refused connection, an exhausted pool."""
    reason = getattr(exc, "orig", None) or exc
    first = str(reason).strip().splitlines()[0] if str(reason).strip() else type(reason).__name__
    return RegistryUnavailableError(
        f"the database is unavailable right now ({first}); nothing was written, retry the request"
    )


LOCK_TIMEOUT_S = 30.0


def make_engine(
    database_url: str, *, lock_timeout_s: float = LOCK_TIMEOUT_S, **kwargs: Any
) -> Engine:
    """An engine for ``database_url`` (sqlite:/// or postgresql+psycopg://).

    A lock not granted within ``lock_timeout_s`` (SQLite's busy timeout, PostgreSQL's
    ``lock_timeout``) fails the transaction (503 ``unavailable``). The pool pre-pings: a
    connection the server dropped is replaced before a request uses it.
    """
    lock_ms = max(1, int(lock_timeout_s * 1000))
    if database_url.startswith("sqlite"):
        _prepare_sqlite_dir(database_url)
        connect = {"check_same_thread": False, "timeout": lock_timeout_s}
        engine = create_engine(database_url, connect_args=connect, **kwargs)
        _install_sqlite_hooks(engine, lock_ms)
        return engine
    connect_args = {"options": f"-c lock_timeout={lock_ms}"}
    return create_engine(database_url, pool_pre_ping=True, connect_args=connect_args, **kwargs)


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
            try:
                self._connect(session, write)
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
            except DBAPIError as exc:
                _rollback_quietly(session)
                if _lost_race(exc):
                    raise ConflictError(
                        f"the database aborted this write in favour of a concurrent one; "
                        f"retry the request ({exc.orig})"
                    ) from exc
                if isinstance(exc, OperationalError | InterfaceError) and _is_unavailable(exc):
                    raise _unavailable(exc) from exc
                if exc.connection_invalidated:
                    raise _unavailable(exc) from exc
                raise
            except PoolTimeoutError as exc:
                _rollback_quietly(session)
                raise _unavailable(exc) from exc
            except BaseException:
                session.rollback()
                raise

    @staticmethod
    def _connect(session: Session, write: bool) -> None:
        """Begin the transaction; any failure to get a connection is 503 (a refused or
        dropped connection, a database that does not accept connections now)."""
        try:
            session.connection(execution_options={_WRITE_OPTION: write})
        except (DBAPIError, PoolTimeoutError) as exc:
            raise _unavailable(exc) from exc

    def read(self) -> AbstractContextManager[Session]:
        """A read transaction (on SQLite a deferred one: it never waits for the writer)."""
        return self.session(write=False)

    def write(self) -> AbstractContextManager[Session]:
        return self.session(write=True)

    def dispose(self) -> None:
        self.engine.dispose()


def _rollback_quietly(session: Session) -> None:
    """Roll back after a database fault; a connection that is gone cannot roll back and
    needs not (the server dropped the transaction with it)."""
    try:
        session.rollback()
    except DBAPIError:
        session.invalidate()


@contextmanager
def session_scope(database_url: str, *, write: bool = True) -> Iterator[Session]:
    """A one-off session on ``database_url`` (used by ``weact token create``)."""
    database = Database(database_url)
    try:
        with database.session(write=write) as session:
            yield session
    finally:
        database.dispose()
