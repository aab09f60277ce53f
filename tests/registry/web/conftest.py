"""Web page fixtures: a registry populated through its API (see ``webworld``), and the
screenshot folder of the browser test (its files are listed at the end of the run by
`support.fixtures`)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from harness import Harness, World, make_tokens, make_world
from support.browser import launch_chromium
from support.shots import Shots
from webworld import Site, populate

from registry.app import create_app
from registry.db.session import Database
from registry.settings import Settings


@pytest.fixture
def site(sqlite_world: World) -> Site:
    """The populated registry on SQLite (the pages' subject is not the database)."""
    return populate(sqlite_world)


@pytest.fixture(scope="module")
def read_site(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[Site]:
    """One populated registry (SQLite) shared by a module's tests that only read."""
    tmp = tmp_path_factory.mktemp("web-read")
    shutil.copyfile(sqlite_template, tmp / "registry.db")
    url = f"sqlite:///{tmp / 'registry.db'}"
    db = Database(url)
    app = create_app(Settings(database_url=url, store_url=str(tmp / "blobs")), database=db)
    try:
        with TestClient(app) as client:
            api = Harness(client=client, db=db, store=app.state.weact.store, tmp=tmp)
            api.tokens = make_tokens(db)
            yield populate(make_world(api))
    finally:
        db.dispose()


@pytest.fixture
def shared_site(read_site: Site) -> Iterator[Site]:
    """The module's populated registry for a test that changes nothing in it (a refusal,
    signing in and out); the client's cookies are dropped afterwards."""
    try:
        yield read_site
    finally:
        read_site.api.client.cookies.clear()


@pytest.fixture
def any_site(world: World) -> Site:
    """The populated registry on SQLite and on PostgreSQL."""
    return populate(world)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium under Playwright (see ``support.browser``), one per module."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="session")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Shots:
    """Where screenshots go: ``$WEACT_SCREENSHOTS``, else a folder under pytest's temp dir."""
    configured = os.environ.get("WEACT_SCREENSHOTS")
    folder = Path(configured) if configured else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return Shots(folder)
