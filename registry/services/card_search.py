"""Text in model cards: the condition behind the adapter list's ``q`` (``text``).

The contract: ``lower(card) LIKE '%' || escaped(text.lower()) || '%'``, a literal,
case-insensitive substring (``%``, ``_`` and ``\\`` are plain characters). This module keeps
that condition exactly and adds an index in front of it where one exists (migration 0012):

- SQLite: the FTS5 ``trigram`` table ``adapter_versions_fts`` picks the candidates (the
  versions whose card holds every trigram of the text, in a row, case folded), and the
  ``LIKE`` then decides among them. Every version the ``LIKE`` accepts is a candidate (the
  trigram tokenizer folds case codepoint by codepoint, a superset of SQLite's ASCII-only
  ``lower`` and ``LIKE``), so the results are the scan's. A text under 3 characters has no
  trigram: it is a scan, as before, and so is a database without the table.
- PostgreSQL: the ``LIKE`` as it is; the GIN ``pg_trgm`` index on ``lower(card)``, when the
  migration could create it, serves it (the planner rechecks every candidate).
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from sqlalchemy import ColumnElement, Engine, and_, column, func, literal_column, select, table
from sqlalchemy import text as sql
from sqlalchemy.orm import Session

from registry.db.models import SqlAdapterVersion

FTS_TABLE = "adapter_versions_fts"
TRIGRAM = 3  # the shortest text the index can find
_has_index: WeakKeyDictionary[Engine, bool] = WeakKeyDictionary()


def card_contains(session: Session, text: str) -> ColumnElement[bool]:
    """The condition "the model card holds `text`" (case-insensitive, literal)."""
    needle = text.lower()
    scan = func.lower(SqlAdapterVersion.card).like(f"%{_escape(needle)}%", escape="\\")
    if len(needle) < TRIGRAM or "\x00" in needle or not uses_index(session):
        return scan
    index = table(FTS_TABLE, column("rowid"))
    phrase = '"' + needle.replace('"', '""') + '"'  # an FTS5 string: every character literal
    candidates = select(index.c.rowid).where(literal_column(FTS_TABLE).op("MATCH")(phrase))
    return and_(SqlAdapterVersion.id.in_(candidates.scalar_subquery()), scan)


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


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
