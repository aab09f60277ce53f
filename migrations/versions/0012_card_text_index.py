"""an index for the text search over model cards

Revision ID: 0012
Revises: 0011

The adapter list's ``q`` (``text``) is a case-insensitive substring of the model card. Without
an index it reads every card. This adds one per database; the search keeps its exact
results either way (`registry/services/card_search.py`):

- SQLite: ``adapter_versions_fts``, an FTS5 table with the ``trigram`` tokenizer over
  ``adapter_versions.card`` (external content: it stores the index, not a second copy of the
  cards), filled from the existing rows and kept in step by three triggers on
  ``adapter_versions``. A SQLite built without FTS5 or without the trigram tokenizer
  (before 3.34) gets no table, and the search reads every card as before.
- PostgreSQL: the ``pg_trgm`` extension (trusted: a database owner may create it) and a
  GIN index on ``lower(card)`` that serves the search's ``LIKE`` as it is. When the
  extension cannot be created the migration still succeeds, without the index, and the
  search reads every card as before; docs/operations.md gives the two statements that add it
  later.

A later SQLite migration that rebuilds ``adapter_versions`` (``batch_alter_table``) drops
the triggers with the old table: it must create them again (``SQLITE_TRIGGERS``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from alembic import op
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

logger = logging.getLogger(__name__)

FTS = "adapter_versions_fts"
PG_INDEX = "ix_adapter_versions_card_trgm"
SQLITE_TRIGGERS = {
    f"{FTS}_insert": f"""
        CREATE TRIGGER {FTS}_insert AFTER INSERT ON adapter_versions BEGIN
            INSERT INTO {FTS}(rowid, card) VALUES (new.id, new.card);
        END""",
    f"{FTS}_delete": f"""
        CREATE TRIGGER {FTS}_delete AFTER DELETE ON adapter_versions BEGIN
            INSERT INTO {FTS}({FTS}, rowid, card) VALUES ('delete', old.id, old.card);
        END""",
    f"{FTS}_update": f"""
        CREATE TRIGGER {FTS}_update AFTER UPDATE OF id, card ON adapter_versions BEGIN
            INSERT INTO {FTS}({FTS}, rowid, card) VALUES ('delete', old.id, old.card);
            INSERT INTO {FTS}(rowid, card) VALUES (new.id, new.card);
        END""",
}


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        _upgrade_sqlite(bind)
    elif bind.dialect.name == "postgresql":
        _upgrade_postgresql(bind)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for trigger in SQLITE_TRIGGERS:
            bind.exec_driver_sql(f"DROP TRIGGER IF EXISTS {trigger}")
        bind.exec_driver_sql(f"DROP TABLE IF EXISTS {FTS}")
    elif bind.dialect.name == "postgresql":
        bind.exec_driver_sql(f"DROP INDEX IF EXISTS {PG_INDEX}")  # pg_trgm stays installed


def _upgrade_sqlite(bind: Connection) -> None:
    try:
        with bind.begin_nested():
            bind.exec_driver_sql(
                f"CREATE VIRTUAL TABLE {FTS} USING fts5(card, content='adapter_versions', "
                "content_rowid='id', tokenize='trigram')"
            )
    except DBAPIError as exc:  # no FTS5 or no trigram tokenizer in this SQLite build
        logger.warning("no text index for model cards (the search reads every card): %s", exc)
        return
    bind.exec_driver_sql(f"INSERT INTO {FTS}({FTS}) VALUES ('rebuild')")
    for sql in SQLITE_TRIGGERS.values():
        bind.exec_driver_sql(sql)


def _upgrade_postgresql(bind: Connection) -> None:
    try:
        with bind.begin_nested():
            bind.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except DBAPIError as exc:  # not the database's owner, or pg_trgm not installed
        logger.warning("no text index for model cards (the search reads every card): %s", exc)
        return
    bind.exec_driver_sql(
        f"CREATE INDEX IF NOT EXISTS {PG_INDEX} ON adapter_versions "
        "USING gin (lower(card) gin_trgm_ops)"
    )
