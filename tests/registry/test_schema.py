"""The migrated schema equals the ORM metadata, on SQLite and on PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, inspect, text

from registry.app import create_app
from registry.db.migrate import downgrade, is_modelled, upgrade
from registry.db.models import Base
from registry.db.session import Database
from registry.settings import Settings


def test_migrations_match_the_models(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            opts = {"compare_type": True, "include_name": is_modelled}
            context = MigrationContext.configure(conn, opts=opts)
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()


def test_downgrade_and_upgrade_again(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'nested' / 'registry.db'}"
    upgrade(url)
    downgrade(url, "base")
    engine = create_engine(url)
    assert set(inspect(engine).get_table_names()) == {"alembic_version"}
    engine.dispose()
    upgrade(url)
    upgrade(url)  # idempotent at head


def test_sqlite_runs_in_wal_mode_with_foreign_keys(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    upgrade(url)
    db = Database(url)
    try:
        with db.read() as session:
            assert session.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert session.execute(text("PRAGMA foreign_keys")).scalar() == 1
    finally:
        db.dispose()


def test_app_refuses_to_start_on_an_unmigrated_database(tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'r.db'}", store_url=str(tmp_path))
    with pytest.raises(RuntimeError, match="weact db upgrade"), TestClient(create_app(settings)):
        pass
