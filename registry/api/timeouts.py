"""Read timeouts for slow clients: uvicorn's HTTP/1.1 protocol (h11) with a deadline on a
request's headers and on the gaps in its body.

uvicorn closes idle keep-alive connections but never times out a client that is slow to
send: a connection that trickles its headers, or stops half-way through a body, holds a
socket and a file descriptor for as long as it likes. `TimedH11Protocol` adds:

- headers: from the connection's start (or the first byte after a finished response) the
  request line and headers must be in within ``header_timeout_s``, else the server answers
  408 and closes the connection;
- body: while a request body is coming, each gap between two pieces may last
  ``body_timeout_s`` at most (time the server itself is not reading does not count), else
  408 (when no response has started) and the connection is closed; the app sees the
  client as gone.

Both come from the settings (``WEACT_HEADER_TIMEOUT_S``, ``WEACT_BODY_TIMEOUT_S``), read
once per process, so the one-process and the ``--workers`` servers behave alike.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger(__name__)

TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
)


def _timeout_body(what: str) -> bytes:
    return b'{"error":"request_timeout","detail":"the client was too slow to send its %s"}' % (
        what.encode()
    )


@functools.cache
def read_timeouts() -> tuple[float, float]:
    """(header, body) timeouts in seconds, from the settings."""
    from registry.settings import Settings

    settings = Settings()
    return settings.header_timeout_s, settings.body_timeout_s


class TimedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with header and body read timeouts (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout_s, self.body_timeout_s = read_timeouts()
        self._read_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.header_timeout_s, "headers")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._read_timer is None and self._between_requests():
            self._arm(self.header_timeout_s, "headers")
        super().data_received(data)
        if self._between_requests():
            return  # still waiting for headers: the header deadline stands
        self._disarm()
        if self.conn.their_state is h11.SEND_BODY:
            self._arm(self.body_timeout_s, "body")

    def on_response_complete(self) -> None:
        self._disarm()
        super().on_response_complete()

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self, seconds: float, what: str) -> None:
        self._disarm()
        self._read_timer = self.loop.call_later(seconds, self._too_slow, what)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _too_slow(self, what: str) -> None:
        self._read_timer = None
        if self.transport.is_closing():
            return
        if what == "body" and self.conn.their_state is not h11.SEND_BODY:
            return
        if what == "body" and self.flow.read_paused:  # the app is not reading: not their fault
            self._arm(self.body_timeout_s, "body")
            return
        logger.info("closing a connection from %s: its %s were too slow", self.client, what)
        if self.cycle is None or not self.cycle.response_started:
            body = _timeout_body(what)
            self.transport.write(TIMEOUT_RESPONSE % (len(body), body))
        self.transport.close()
