"""Alembic configured in code: ``upgrade(database_url)`` needs no alembic.ini."""

from __future__ import annotations

from importlib.resources import files

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from registry.db.session import make_engine

UNMODELLED = ("adapter_versions_fts", "ix_adapter_versions_card_trgm")
"""What migrations create outside the ORM models (0012: the card search's FTS5 table, with
its shadow tables, and PostgreSQL trigram index), by name prefix."""


def is_modelled(name: str | None, type_: str, parent_names: object) -> bool:
    """Alembic's ``include_name`` hook: False for what `UNMODELLED` names, so comparing the
    schema with the models (and autogenerate) leaves them alone."""
    return name is None or not name.startswith(UNMODELLED)


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(files("migrations")))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the schema at ``database_url`` up to ``revision`` (creates SQLite dirs)."""
    engine = make_engine(database_url)
    try:
        with engine.begin() as connection:
            config = alembic_config(database_url)
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
    finally:
        engine.dispose()


def downgrade(database_url: str, revision: str) -> None:
    engine = make_engine(database_url)
    try:
        with engine.begin() as connection:
            config = alembic_config(database_url)
            config.attributes["connection"] = connection
            command.downgrade(config, revision)
    finally:
        engine.dispose()


def head_revision() -> str | None:
    """The newest migration shipped with the code."""
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def check_current(engine: Engine) -> None:
    """Raise ``RuntimeError`` with a hint unless the database is migrated to head."""
    with engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_revision()
    head = head_revision()
    if current != head:
        raise RuntimeError(
            f"database schema is at {current or 'nothing'}, the code needs {head}: "
            "run `weact db upgrade` (or `weact serve`, which migrates first)"
        )
