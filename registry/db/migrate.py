"""Alembic configured in code: ``upgrade(database_url)`` needs no alembic.ini."""

from __future__ import annotations

from importlib.resources import files

from alembic import command
from alembic.config import Config

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
