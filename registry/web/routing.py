"""The route class of the pages: a typed error becomes an HTML page, never the API's JSON.

The status is the API's (``registry.errors.http_status_for``); a GET that needs a signed-in
user is sent to ``/sign-in?next=...`` instead (303), dropping a cookie that stopped working.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import urlencode

from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from registry.errors import (
    GateFailedError,
    InvalidError,
    RegistryError,
    UnauthorizedError,
    http_status_for,
)
from registry.web.render import SECURITY_HEADERS, page
from registry.web.session import TOKEN_COOKIE, clear_token_cookie


def _message(detail: Any) -> str:
    if isinstance(detail, str):
        return detail
    if isinstance(detail, dict) and "message" in detail:
        return str(detail["message"])
    if isinstance(detail, dict) and "passed" in detail:
        return "the gate refused the promotion: a benchmark regressed or has no score"
    return "the request was refused"


def _problems(detail: Any) -> list[str]:
    if isinstance(detail, dict):
        return [str(p) for p in detail.get("problems", [])]
    if isinstance(detail, list):
        return [f"{'.'.join(map(str, d.get('loc', [])))}: {d.get('msg', '')}" for d in detail]
    return []


def _sign_in_redirect(request: Request) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    response = RedirectResponse(
        f"/sign-in?{urlencode({'next': target})}", status_code=303, headers=SECURITY_HEADERS
    )
    if TOKEN_COOKIE in request.cookies:
        clear_token_cookie(response, request)
    return response


def error_page(request: Request, exc: RegistryError) -> Response:
    """The page for a refused request (the sign-in redirect for a GET without a user)."""
    if isinstance(exc, UnauthorizedError) and request.method in {"GET", "HEAD"}:
        return _sign_in_redirect(request)
    return page(
        request,
        "error.html",
        user=getattr(request.state, "web_user", None),
        status=http_status_for(exc.code),
        code=exc.code,
        message=_message(exc.detail),
        problems=_problems(exc.detail),
        report=exc.detail if isinstance(exc, GateFailedError) else None,
    )


def _validation(exc: RequestValidationError) -> InvalidError:
    detail = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", ""))} for e in exc.errors()]
    return InvalidError(detail)


class PageRoute(APIRoute):
    """An ``APIRoute`` whose handler renders typed errors as HTML pages."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except RegistryError as exc:
                return error_page(request, exc)
            except RequestValidationError as exc:
                return error_page(request, _validation(exc))

        return handle
