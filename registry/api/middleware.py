"""Pure ASGI middleware: one body-size limit for every request, and a 500 that keeps the
connection.

``BodyLimitMiddleware`` bounds every request body before any route sees it: blob uploads
(``/v1/blobs/...``) by ``max_body_bytes``, every other body (JSON) by ``max_json_bytes``.
A declared ``Content-Length`` over the limit is refused at once; a body without one
(chunked) is counted as it arrives (JSON bodies are buffered up to their limit, blob
uploads are counted again by the route while they stream to a spool file). Either way the
answer is 413 ``{"error": "payload_too_large", "detail": ...}``.

``InternalErrorMiddleware`` turns an unexpected exception into 500 ``internal`` itself.
Starlette's own handler re-raises after answering, which makes the server drop the
keep-alive connection; this one logs and returns, so the connection stays usable.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)

BLOB_PREFIX = "/v1/blobs/"


def error_json(status: int, code: str, detail: Any) -> JSONResponse:
    return JSONResponse({"error": code, "detail": detail}, status_code=status)


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, *, max_json_bytes: int, max_body_bytes: int) -> None:
        self.app = app
        self.max_json_bytes = max_json_bytes
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        is_blob = str(scope.get("path", "")).startswith(BLOB_PREFIX)
        limit = self.max_body_bytes if is_blob else self.max_json_bytes
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await self._refuse(scope, receive, send, limit)
            return
        if is_blob:  # streamed by the route, which counts against the same limit
            await self.app(scope, receive, send)
            return
        body = await self._read(receive, limit)
        if body is None:
            await self._refuse(scope, receive, send, limit)
            return
        await self.app(scope, _replay(body, receive), send)

    @staticmethod
    async def _read(receive: Receive, limit: int) -> bytes | None:
        """The whole body, or None once it passes ``limit`` (the rest is left unread)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks)  # a disconnect: let the route see an empty body
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        what = "blob" if str(scope.get("path", "")).startswith(BLOB_PREFIX) else "request body"
        response = error_json(
            413, "payload_too_large", f"{what} is larger than the limit of {limit} bytes"
        )
        response.headers["Connection"] = "close"
        await response(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


class InternalErrorMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except ClientDisconnect:
            logger.info("client went away during %s %s", scope.get("method"), scope.get("path"))
        except Exception:
            logger.exception("unhandled error in %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise  # a response is half sent: only closing the connection tells the client
            response = error_json(500, "internal", "internal server error")
            await response(scope, receive, send)
