"""What the pages depend on: the signed-in user, the posted form, a checked action.

The token is authenticated exactly as the API does it (``registry.services.tokens``) and
each role's rights are ``registry.auth``'s; see ``registry.web.session`` for the cookie and
the CSRF rules.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import parse_qsl

from fastapi import Depends, Request

from registry.api.deps import StateDep
from registry.auth import Permission, action_of, allows, authorize
from registry.domain import Principal
from registry.errors import PayloadTooLargeError, UnauthorizedError
from registry.services.tokens import authenticate
from registry.web.errors import FormError, SignInRequired
from registry.web.session import CSRF_FIELD, bearer_token, check_csrf, check_origin, csrf_token

MAX_FORM_BYTES = 64 * 1024
FORM_TYPE = "application/x-www-form-urlencoded"


@dataclass(frozen=True)
class WebUser:
    """A signed-in user: who, and the CSRF token of their forms (None: header auth)."""

    principal: Principal
    csrf: str | None

    def can(self, permission: str) -> bool:
        return allows(self.principal.role, Permission(permission))


def current_user(request: Request, state: StateDep) -> WebUser:
    """The user behind the cookie or the bearer header; ``SignInRequired`` otherwise."""
    token, from_cookie = bearer_token(request)
    if token is None:
        raise SignInRequired("sign in with an API token to see the registry")
    try:
        with state.db.read() as session:
            principal = authenticate(session=session, token=token)
    except UnauthorizedError as exc:
        raise SignInRequired(f"{exc.detail}: sign in again") from exc
    authorize(principal, Permission.READ)
    user = WebUser(principal=principal, csrf=csrf_token(token) if from_cookie else None)
    request.state.web_user = user  # for the error page of a later refusal
    return user


async def form_fields(request: Request) -> dict[str, str]:
    """The posted form (URL-encoded, at most 64 KiB; an empty body is an empty form)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise PayloadTooLargeError(f"a form is at most {MAX_FORM_BYTES} bytes")
    if not body:
        return {}
    if request.headers.get("content-type", "").split(";")[0].strip() != FORM_TYPE:
        raise FormError(f"expected a form ({FORM_TYPE})")
    try:
        return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=200))
    except ValueError as exc:
        raise FormError(f"unreadable form: {exc}") from exc


Viewer = Annotated[WebUser, Depends(current_user)]
Form = Annotated[dict[str, str], Depends(form_fields)]


def acting(permission: Permission) -> Callable[..., Awaitable[WebUser]]:
    """A dependency: the signed-in user, allowed ``permission``, posting a genuine form."""

    async def dependency(request: Request, user: Viewer, form: Form) -> WebUser:
        check_origin(request)
        if user.csrf is not None:
            check_csrf(user.csrf, form.get(CSRF_FIELD))
        authorize(user.principal, permission, action_of(request.method, request.url.path))
        return user

    return dependency


Approving = Annotated[WebUser, Depends(acting(Permission.APPROVE))]
