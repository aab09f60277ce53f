"""The registry's web pages, served by ``weact serve`` beside the API.

Plain server-rendered HTML (Jinja2 templates in ``templates/``, one stylesheet and one small
script in ``static/``, no build step, nothing from another host). Reading works without
JavaScript; the script only adds copy buttons and confirmations. Pages call the same
service functions as the API routes and authenticate the same bearer tokens: see
``registry.web.session`` for signing in (an HttpOnly, SameSite=Strict cookie) and the CSRF
defence of the forms, ``registry.web.pages`` and ``registry.web.actions`` for the pages.
"""

from __future__ import annotations

from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from registry.web import actions, explore, pages, signin
from registry.web.render import STATIC

# Every page and the static files at ``/static``, made once per process and listed by each
# app (as ``registry.api.app.API_ROUTES``: the pages reach their state through the request).
ROUTES: tuple[BaseRoute, ...] = (
    *(route for module in (signin, explore, pages, actions) for route in module.router.routes),
    Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
)
