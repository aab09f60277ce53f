"""Alembic configured in code: ``upgrade(database_url)`` needs no alembic.ini."""

from __future__ import annotations

from importlib.resources import files

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from registry.db.session import make_engine


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
