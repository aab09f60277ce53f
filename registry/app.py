"""The registry's composition root: the API (``registry.api``) and the web pages
(``registry.web``) joined into the one app that ``weact serve`` runs.

It sits above both packages so that neither imports the other's wiring: the pages use the
API's dependencies (``registry.api.deps``), the API knows nothing of the pages.

    app = create_app(Settings())        # what one server process runs
    APP_FACTORY                          # what each of `weact serve --workers N` imports
"""

from __future__ import annotations

from fastapi import FastAPI

from registry.api.app import create_api_app
from registry.db.session import Database
from registry.settings import Settings
from registry.web import install_web

# The factory uvicorn imports in each worker process (`registry.api.serving.serve_workers`).
APP_FACTORY = "registry.app:app_from_environment"


def create_app(settings: Settings, *, database: Database | None = None) -> FastAPI:
    """The registry (API at ``/v1``, pages at ``/``) over ``settings``; an existing
    ``Database`` may be shared."""
    app = create_api_app(settings, database=database)
    install_web(app)
    return app


def app_from_environment() -> FastAPI:
    """The app of one worker: settings from ``WEACT_*`` (set by ``weact serve``)."""
    return create_app(Settings())
