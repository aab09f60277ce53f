"""The one place where errors become HTTP responses ``{"error": code, "detail": ...}``.

Unexpected exceptions are answered by ``registry.api.middleware.InternalErrorMiddleware``
(500 ``internal``), which keeps the keep-alive connection open.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from registry.errors import RETRY_AFTER_S, RegistryError, http_status_for

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "bad_request",
    409: "conflict",
    413: "payload_too_large",
    422: "invalid",
}


def error_response(
    status: int, code: str, detail: Any, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """The one error shape; 401 names the scheme, a retryable code says when to retry."""
    headers = dict(headers or {})
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if code in RETRY_AFTER_S:
        headers["Retry-After"] = str(RETRY_AFTER_S[code])
    return JSONResponse({"error": code, "detail": detail}, status_code=status, headers=headers)


def _validation_detail(exc: RequestValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": list(err.get("loc", ())), "msg": str(err.get("msg", "")), "type": err.get("type")}
        for err in exc.errors()
    ]


async def _registry_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RegistryError)
    return error_response(http_status_for(exc.code), exc.code, exc.detail)


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return error_response(422, "invalid", _validation_detail(exc))


_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def _allowed_methods(request: Request) -> str:
    """Every method some route has for this path (Starlette's 405 names the first route's
    only: `POST` for a path that also has a `GET`)."""
    routes = request.app.router.routes
    allowed = [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes
        )  # fmt: skip
    ]
    return ", ".join(allowed)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "bad_request")
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = _allowed_methods(request) or headers.get("Allow", "")
    return error_response(exc.status_code, code, exc.detail, headers)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RegistryError, _registry_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
