"""Signing in to the pages with an API token, and the CSRF defence of their forms.

- A user pastes a bearer token (from ``weact token create``) on ``/sign-in``. It is checked
  like any API call (``registry.services.tokens.authenticate``) and kept in the cookie
  ``weact_token``: ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other site's
  page sends it), ``Path=/``, ``Secure`` when the page was served over HTTPS; a browser
  session cookie. The registry stores no session: every request authenticates the token
  again, so revoking it signs the browser out. Pages also accept ``Authorization: Bearer``.
- Every state-changing form carries a CSRF token. Signed in, it is
  ``HMAC-SHA256(key=the bearer token, "weact-web-csrf")``: stable across restarts and
  replicas, and worthless without the secret that the cookie already holds. The sign-in
  form itself uses a random nonce, double-submitted in the cookie ``weact_signin``.
  A request authenticated by the ``Authorization`` header needs none (a browser never
  adds that header by itself). A form posted with an ``Origin`` of another host is
  refused whatever it carries.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from registry.web.errors import CsrfError

TOKEN_COOKIE = "weact_token"
SIGNIN_COOKIE = "weact_signin"
CSRF_FIELD = "csrf"
_CSRF_MESSAGE = b"weact-web-csrf"


def bearer_token(request: Request) -> tuple[str | None, bool]:
    """The request's token and whether it came from the cookie (rather than the header)."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip(), False
    cookie = request.cookies.get(TOKEN_COOKIE)
    return (cookie, True) if cookie else (None, False)


def csrf_token(token: str) -> str:
    """The CSRF token of the forms of a user signed in with ``token``."""
    return hmac.new(token.encode("utf-8"), _CSRF_MESSAGE, hashlib.sha256).hexdigest()


def new_nonce() -> str:
    return secrets.token_urlsafe(24)


def check_origin(request: Request) -> None:
    """Refuse a form whose ``Origin`` names another host than the one it was sent to."""
    origin = request.headers.get("origin")
    if origin is None:
        return
    if urlsplit(origin).netloc != request.headers.get("host", ""):
        raise CsrfError(f"form posted from another origin ({origin})")


def check_csrf(expected: str | None, given: str | None) -> None:
    """``CsrfError`` unless the form carries the expected token."""
    if not expected or not given or not hmac.compare_digest(expected, given):
        raise CsrfError("the form's CSRF token is missing or wrong: reload the page and retry")


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def set_token_cookie(response: Response, request: Request, token: str) -> None:
    response.set_cookie(
        TOKEN_COOKIE, token, httponly=True, samesite="strict", secure=_secure(request), path="/"
    )


def clear_token_cookie(response: Response, request: Request) -> None:
    response.delete_cookie(
        TOKEN_COOKIE, httponly=True, samesite="strict", secure=_secure(request), path="/"
    )


def set_nonce_cookie(response: Response, request: Request, nonce: str) -> None:
    response.set_cookie(
        SIGNIN_COOKIE,
        nonce,
        httponly=True,
        samesite="strict",
        secure=_secure(request),
        path="/sign-in",
        max_age=3600,
    )


def clear_nonce_cookie(response: Response, request: Request) -> None:
    response.delete_cookie(
        SIGNIN_COOKIE, httponly=True, samesite="strict", secure=_secure(request), path="/sign-in"
    )


def safe_next(target: str | None) -> str:
    """A local path to go to after signing in (never another site: no open redirect)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    if any(ord(ch) < 0x20 for ch in target):
        return "/"
    return target
