"""Bearer tokens of a node: every HTTP request (MCP included) carries one of them.

Each token is a client of its own: an MCP episode handle works only with the token that
opened it.
"""

from __future__ import annotations

import hmac
from collections.abc import Collection

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send


class BearerAuth:
    """ASGI middleware: a request without one of the bearer tokens gets 401."""

    def __init__(self, app: ASGIApp, tokens: Collection[str]) -> None:
        self.app = app
        self.expected = [f"Bearer {token}".encode() for token in tokens]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
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
