"""The registry's composition root: the API (``registry.api``) and the web pages
(``registry.web``) joined into the one app that ``weact serve`` runs.

It sits above both packages so that neither imports the other's wiring: the pages use the
API's dependencies (``registry.api.deps``), the API knows nothing of the pages.

    line = prepare(settings)             # once before serving: schema, trust root, keys
    app = create_app(Settings())        # what one server process runs
    APP_FACTORY                          # what each of `weact serve --workers N` imports
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from registry.api.app import create_api_app
from registry.db.session import Database
from registry.settings import Settings
from registry.web import ROUTES as PAGES

# The factory uvicorn imports in each worker process (`registry.api.serving.serve_workers`).
APP_FACTORY = "registry.app:app_from_environment"


def prepare(settings: Settings) -> str:
    """What `weact serve` does once before any worker serves: the timestamp key (created
    when absent; written into ``settings`` so that workers share it), the schema at head,
    the trust root installed (``settings.trust_root``, or the stored chain, or a development
    root under ``settings.trust_dir``). Returns the line that says which root serves."""
    from registry.db.migrate import upgrade
    from registry.services.channel_trust import ensure_timestamp_key
    from registry.services.trust_roots import install_root
    from registry.trust import TrustRoot

    given = TrustRoot.load(Path(settings.trust_root)) if settings.trust_root else None
    settings.timestamp_key = str(ensure_timestamp_key(settings))
    upgrade(settings.database_url)
    database = Database(settings.database_url)
    try:
        return install_root(
            database=database, given=given, trust_dir=Path(settings.trust_dir),
            strict=settings.strict,
        )  # fmt: skip
    finally:
        database.dispose()


def create_app(settings: Settings, *, database: Database | None = None) -> FastAPI:
    """The registry (API at ``/v1``, pages at ``/``) over ``settings``; an existing
    ``Database`` may be shared."""
    return create_api_app(settings, database=database, routes=PAGES)


def app_from_environment() -> FastAPI:
    """The app of one worker: settings from ``WEACT_*`` (set by ``weact serve``)."""
    return create_app(Settings())
