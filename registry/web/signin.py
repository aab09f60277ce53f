"""Signing in with an API token and signing out (see ``registry.web.session`` for the rules).

GET  /sign-in?next=/path    the form (sets the one-time ``weact_signin`` nonce cookie)
POST /sign-in               token, csrf, next -> 303 to ``next`` with the token cookie;
                            401 and the form again for a token the registry refuses
POST /sign-out              csrf -> 303 to /sign-in, the cookie cleared
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import RedirectResponse, Response

from registry.api.deps import StateDep
from registry.errors import UnauthorizedError
from registry.services.tokens import authenticate
from registry.web.deps import Form
from registry.web.render import SECURITY_HEADERS, page
from registry.web.routing import PageRoute
from registry.web.session import (
    CSRF_FIELD,
    SIGNIN_COOKIE,
    bearer_token,
    check_csrf,
    check_origin,
    clear_nonce_cookie,
    clear_token_cookie,
    csrf_token,
    new_nonce,
    safe_next,
    set_nonce_cookie,
    set_token_cookie,
)

router = APIRouter(route_class=PageRoute, include_in_schema=False)


def _form(request: Request, target: str, error: str | None = None) -> Response:
    nonce = new_nonce()
    status = 401 if error else 200
    response = page(request, "sign_in.html", status=status, next=target, nonce=nonce, error=error)
    set_nonce_cookie(response, request, nonce)
    return response


@router.get("/sign-in")
def sign_in_form(
    request: Request, target: Annotated[str | None, Query(alias="next")] = None
) -> Response:
    return _form(request, safe_next(target))


@router.post("/sign-in")
def sign_in(request: Request, state: StateDep, form: Form) -> Response:
    check_origin(request)
    check_csrf(request.cookies.get(SIGNIN_COOKIE), form.get(CSRF_FIELD))
    target = safe_next(form.get("next"))
    token = form.get("token", "").strip()
    try:
        with state.db.read() as session:
            authenticate(session=session, token=token)
    except UnauthorizedError as exc:
        return _form(request, target, error=f"{exc.detail}: check the token and paste it again")
    response = RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)
    set_token_cookie(response, request, token)
    clear_nonce_cookie(response, request)
    return response


@router.post("/sign-out")
def sign_out(request: Request, form: Form) -> Response:
    check_origin(request)
    token, from_cookie = bearer_token(request)
    if token is not None and from_cookie:
        check_csrf(csrf_token(token), form.get(CSRF_FIELD))
    response = RedirectResponse("/sign-in", status_code=303, headers=SECURITY_HEADERS)
    clear_token_cookie(response, request)
    return response
