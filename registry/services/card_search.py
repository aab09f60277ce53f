"""Text in model cards: the condition behind the adapter list's ``q`` (``text``).

The contract: ``lower(card) LIKE '%' || escaped(text.lower()) || '%'``, a literal,
case-insensitive substring (``%``, ``_`` and ``\\`` are plain characters). This module keeps
that condition exactly and adds an index in front of it where one exists (migration 0012):

- SQLite: the FTS5 ``trigram`` table ``adapter_versions_fts``, joined on its rowid, picks
  the candidates (the versions whose card holds every trigram of the text, in a row, case
  folded), and the ``LIKE`` then decides among them. Every version the ``LIKE`` accepts is a
  candidate (the trigram tokenizer folds case codepoint by codepoint, a superset of
  SQLite's ASCII-only ``lower`` and ``LIKE``), so the results are the scan's. A text under 3
  characters has no trigram: it is a scan, as before, and so is a database without the
  table.
- PostgreSQL: the ``LIKE`` as it is; the GIN ``pg_trgm`` index on ``lower(card)``, when the
  migration could create it, serves it (the planner rechecks every candidate). The pattern
  is a literal in the statement, so the planner weighs each text (`_pattern`).
"""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import (
    ColumnElement,
    Engine,
    Select,
    String,
    bindparam,
    column,
    func,
    literal_column,
    table,
)
from sqlalchemy import text as sql
from sqlalchemy.orm import Session

from registry.db.models import SqlAdapterVersion
from registry.errors import InvalidError

FTS_TABLE = "adapter_versions_fts"
TRIGRAM = 3  # the shortest text the index can find
_has_index: WeakKeyDictionary[Engine, bool] = WeakKeyDictionary()


def narrow(
    query: Select[Any], *, session: Session, text: str | None
) -> tuple[Select[Any], ColumnElement[int]]:
    """`query` (over adapter versions) kept to the versions whose model card holds `text`
    (case-insensitive, literal; None: all), and the column their ids are to be ordered and
    paged by. Through the index that column is the FTS5 table's rowid (equal to the id): in
    that order SQLite reads the index lazily, so a page or a capped count of a text found in
    most cards stops early instead of gathering every match first."""
    if text is None:
        return query, SqlAdapterVersion.id.expression
    if not text.strip():
        raise InvalidError("text to search must not be blank")
    needle = text.lower()
    scan = func.lower(SqlAdapterVersion.card).like(_pattern(session, needle), escape="\\")
    if len(needle) < TRIGRAM or "\x00" in needle or not uses_index(session):
        return query.where(scan), SqlAdapterVersion.id.expression
    index = table(FTS_TABLE, column("rowid"))
    phrase = '"' + needle.replace('"', '""') + '"'  # an FTS5 string: every character literal
    query = query.join(index, index.c.rowid == SqlAdapterVersion.id)
    return query.where(literal_column(FTS_TABLE).op("MATCH")(phrase), scan), index.c.rowid


def uses_index(session: Session) -> bool:
    """Whether this SQLite database has the FTS5 table (PostgreSQL: False, the `LIKE` is
    served by its index, if any, as it stands). Looked up once per engine."""
    bind = session.get_bind()
    if bind.dialect.name != "sqlite":
        return False
    engine = bind.engine
    if engine not in _has_index:
        found = session.scalar(
            sql("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = :name"),
            {"name": FTS_TABLE},
        )
        _has_index[engine] = bool(found)
    return _has_index[engine]


def _pattern(session: Session, needle: str) -> Any:
    """The `LIKE` pattern: a parameter, or (PostgreSQL) a literal in the statement. A
    parameter hides the text from PostgreSQL's planner once the statement is prepared
    (psycopg prepares a statement run 5 times; PostgreSQL then keeps one generic plan): a
    plan for any text reads the whole trigram index for a text in most cards (100,000
    versions: 44 ms before the first row) or under 3 characters (no trigram: 110 ms), where
    the plan for the text itself stops a scan at the page or the count's cap."""
    pattern = f"%{_escape(needle)}%"
    if session.get_bind().dialect.name != "postgresql":
        return pattern
    return bindparam("card_text", pattern, type_=String(), literal_execute=True)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
