"""Bearer tokens of a node, and whose episodes a request may see.

Every HTTP request (MCP included) but the liveness probe (`PUBLIC_PATHS`) carries one of the
node's tokens: a client token (`weact runtime serve --token`, `WEACT_RUNTIME_TOKEN`) or an
admin token (`--admin-token`, `WEACT_RUNTIME_ADMIN_TOKEN`). Each client token is a client
of its own: the episodes it starts over HTTP, and the MCP handles it opens, are its alone;
another token is told they do not exist (404). An admin token sees, reads, follows and
cancels every episode. A node without tokens has one anonymous client, which sees all.
"""

from __future__ import annotations

import hmac
from collections.abc import Collection
from typing import Annotated

from fastapi import Depends, Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from runtime.handles import owner_of

PUBLIC_PATHS = frozenset({"/livez"})  # answer without a token, and say nothing but "alive"


class BearerAuth:
    """ASGI middleware: a request without one of the bearer tokens gets 401."""

    def __init__(self, app: ASGIApp, tokens: Collection[str]) -> None:
        self.app = app
        self.expected = [f"Bearer {token}".encode() for token in tokens]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"authorization", b"")
        # every token compared, in constant time each: no early exit tells which one is near
        if sum(hmac.compare_digest(given, expected) for expected in self.expected):
            await self.app(scope, receive, send)
            return
        response = JSONResponse(
            {"error": "unauthorized", "detail": "missing or wrong bearer token"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )
        await response(scope, receive, send)


def admin_owners(tokens: Collection[str]) -> frozenset[str]:
    """The owners (`owner_of` their credentials) of the admin tokens."""
    return frozenset(owner_of(f"Bearer {token}") for token in tokens)


def caller(request: Request) -> str:
    """Who is calling: a digest of the request's bearer credentials ("" without any)."""
    return owner_of(request.headers.get("authorization"))


def scope_of(request: Request) -> str | None:
    """Whose episodes the caller sees: its own (its owner), or all (None) for an admin."""
    owner = caller(request)
    return None if owner in request.app.state.admin_owners else owner


CallerDep = Annotated[str, Depends(caller)]
ScopeDep = Annotated[str | None, Depends(scope_of)]
