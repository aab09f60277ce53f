"""Slow clients against a real `weact serve` (issue 25): a request whose headers or body do
not arrive in time is answered 408 and its connection closed, so slowloris connections
cannot pile up; a slow but steady upload still succeeds. And 405 names the allowed methods.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from harness import make_tokens

from registry.db.session import Database
from registry.launcher import EmbeddedRegistry, embedded_registry

TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRegistry]:
    """One server for the module: the tests' subject is how it treats connections, which no
    test changes (a `weact serve` start costs seconds)."""
    with contextlib.ExitStack() as stack:
        with pytest.MonkeyPatch.context() as monkeypatch:  # for the child only: not kept set
            monkeypatch.setenv("WEACT_HEADER_TIMEOUT_S", str(TIMEOUT_S))
            monkeypatch.setenv("WEACT_BODY_TIMEOUT_S", str(TIMEOUT_S))
            workdir = tmp_path_factory.mktemp("slow-clients")
            running = stack.enter_context(embedded_registry(workdir))
        yield running


def _connect(server: EmbeddedRegistry) -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def _until_closed(sock: socket.socket) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long it took."""
    started, data = time.monotonic(), b""
    while chunk := sock.recv(65536):
        data += chunk
    return data, time.monotonic() - started


@pytest.mark.parametrize(
    "sent",
    [b"", b"GET /v1/healthz HTTP/1.1\r\nHost: x\r\n", b"GET /v1/heal"],
    ids=["nothing", "headers-without-end", "half-a-request-line"],
)
def test_slow_headers_are_cut_off(server: EmbeddedRegistry, sent: bytes) -> None:
    with _connect(server) as sock:
        sock.sendall(sent)
        answer, took = _until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b"request_timeout" in answer
    assert TIMEOUT_S * 0.8 < took < TIMEOUT_S + 3, took


def test_a_stalled_body_is_cut_off(server: EmbeddedRegistry) -> None:
    head = (b"POST /v1/capabilities HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n")  # fmt: skip
    with _connect(server) as sock:
        sock.sendall(head + b'{"name": "p')
        answer, took = _until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert took < TIMEOUT_S + 3, took


def test_many_slowloris_connections_are_closed_and_the_server_answers(
    server: EmbeddedRegistry,
) -> None:
    socks = [_connect(server) for _ in range(50)]
    try:
        for sock in socks:
            sock.sendall(b"GET /v1/healthz HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        assert httpx.get(f"{server.url}/v1/healthz", timeout=10).status_code == 200
        assert time.monotonic() - started < 1.0
        closed = [_until_closed(sock)[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()
    assert max(closed) < TIMEOUT_S + 3, max(closed)


def test_a_slow_but_steady_upload_succeeds(server: EmbeddedRegistry) -> None:
    db = Database(server.database_url)
    token = make_tokens(db)["publisher"]
    db.dispose()

    pieces = [bytes([i]) * 1000 for i in range(4)]
    digest = hashlib.sha256(b"".join(pieces)).hexdigest()

    def trickle() -> Iterator[bytes]:
        for piece in pieces:
            time.sleep(TIMEOUT_S / 2)  # each gap within the body timeout, the whole above it
            yield piece

    response = httpx.put(f"{server.url}/v1/blobs/{digest}", content=trickle(), timeout=30,
                         headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    assert response.status_code == 201, response.text


def test_405_names_the_allowed_methods(server: EmbeddedRegistry) -> None:
    response = httpx.delete(f"{server.url}/v1/capabilities", timeout=10)
    assert response.status_code == 405
    assert set(response.headers["Allow"].replace(" ", "").split(",")) == {"GET", "POST"}
    assert response.json()["error"] == "bad_request"


def test_a_keep_alive_connection_serves_requests_after_a_pause(server: EmbeddedRegistry) -> None:
    """The header deadline starts with a request's first byte, not with the connection's
    idle time after a response (that is the keep-alive timeout's)."""
    with httpx.Client(base_url=server.url, timeout=10) as client:
        assert client.get("/v1/healthz").status_code == 200
        time.sleep(TIMEOUT_S * 1.5)
        assert client.get("/v1/healthz").status_code == 200
