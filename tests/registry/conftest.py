"""Registry fixtures: one suite on SQLite and PostgreSQL, blobs on local dirs and S3.

PostgreSQL gets a fresh database per test session (``weact_test_<random>``), migrated
once, truncated before each test and dropped at the end. SQLite copies a migrated file.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Harness, World, build_harness, fresh_database, make_world
from sqlalchemy import create_engine

from registry.db.migrate import upgrade

PG_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432"


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    admin = create_engine(f"{PG_SERVER}/postgres", isolation_level="AUTOCOMMIT")
    name = f"weact_test_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    except Exception as exc:  # noqa: BLE001 - no server: skip the PostgreSQL half
        admin.dispose()
        pytest.skip(f"PostgreSQL at 127.0.0.1:5432 unavailable: {exc}")
    url = f"{PG_SERVER}/{name}"
    try:
        upgrade(url)
        yield url
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "registry.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return fresh_database(request, tmp_path)


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return str(tmp_path / "blobs")


@pytest.fixture
def api(database_url: str, store_url: str, tmp_path: Path) -> Iterator[Harness]:
    """The registry app on each database, local blob store."""
    yield from build_harness(database_url, store_url, tmp_path)


@pytest.fixture
def sqlite_api(sqlite_template: Path, store_url: str, tmp_path: Path) -> Iterator[Harness]:
    """The registry app on SQLite only (for tests whose subject is not the database)."""
    path = tmp_path / "registry.db"
    shutil.copyfile(sqlite_template, path)
    yield from build_harness(f"sqlite:///{path}", store_url, tmp_path)


@pytest.fixture
def world(api: Harness) -> World:
    return make_world(api)


@pytest.fixture
def sqlite_world(sqlite_api: Harness) -> World:
    return make_world(sqlite_api)
