"""The registry's web pages, served by ``weact serve`` beside the API.

Plain server-rendered HTML (Jinja2 templates in ``templates/``, one stylesheet and one small
script in ``static/``, no build step, nothing from another host). Reading works without
JavaScript; the script only adds copy buttons and confirmations. Pages call the same
service functions as the API routes and authenticate the same bearer tokens: see
``registry.web.session`` for signing in (an HttpOnly, SameSite=Strict cookie) and the CSRF
defence of the forms, ``registry.web.pages`` and ``registry.web.actions`` for the pages.
"""

from __future__ import annotations

from functools import cache

from fastapi import APIRouter, FastAPI
from starlette.staticfiles import StaticFiles

from registry.web import actions, explore, pages, signin
from registry.web.render import STATIC


@cache
def web_router() -> APIRouter:
    """Every page, assembled once per process and shared by its apps (as
    ``registry.api.app.api_router``: the pages reach their state through the request)."""
    router = APIRouter()
    for module in (signin, explore, pages, actions):
        router.include_router(module.router)
    return router


def install_web(app: FastAPI) -> None:
    """Serve the pages at ``/`` and their static files at ``/static`` on ``app``."""
    app.include_router(web_router())
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
