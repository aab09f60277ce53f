"""registry.client when the registry does not answer, or answers as no registry would.

Real sockets on 127.0.0.1: a closed port, a name that does not resolve, a server that
resets the connection, one that never answers, one that breaks a body off, a gateway's 503
and a web server that is not the registry. Every failure is a typed `registry.errors` error
raised `from` the httpx error, never httpx itself; no method of the client lets one through.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import socket
import ssl
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from securesystemslib.signer import CryptoSigner
from support.serving import stop_accepting

from registry import errors
from registry.client import RegistryClient
from registry.client.transport import tls_context
from registry.client.watch import ChannelWatch

Handler = Callable[[socket.socket], None]


def closed_port() -> int:
    """A loopback port with nothing listening on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def raw_server() -> Iterator[Callable[[Handler], str]]:
    """Serve each connection with `handler(conn)` on a loopback port; returns the base URL.
    Each listener stops (`stop_accepting`) at the end of the test."""
    served: list[tuple[socket.socket, threading.Thread]] = []

    def start(handler: Handler) -> str:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()

        def loop() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                with conn:
                    handler(conn)

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        served.append((listener, thread))
        return f"http://127.0.0.1:{listener.getsockname()[1]}"

    yield start
    for listener, thread in served:
        stop_accepting(listener, thread)


def read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def answer(status: str, body: bytes, *, length: int | None = None, kind: str = "text/html"):
    def handler(conn: socket.socket) -> None:
        read_request(conn)
        head = (
            f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\n"
            f"Content-Length: {len(body) if length is None else length}\r\n"
            "Connection: close\r\n\r\n"
        )
        conn.sendall(head.encode() + body)

    return handler


def reset(conn: socket.socket) -> None:
    read_request(conn)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST


def silent(conn: socket.socket) -> None:
    read_request(conn)
    conn.settimeout(10)
    with contextlib.suppress(OSError):
        conn.recv(1)  # never answer: wait until the client gives up and closes


def test_a_closed_port_is_unavailable_with_its_cause() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    with RegistryClient(url, "t") as client, pytest.raises(errors.RegistryUnavailableError) as e:
        client.get_channel("prod")
    assert isinstance(e.value.__cause__, httpx.ConnectError)
    assert isinstance(e.value, ConnectionError)
    assert (e.value.code, e.value.status_code, e.value.response) == ("unavailable", None, None)
    assert f"GET {url}/v1/channels/prod" in str(e.value)


def test_a_name_that_does_not_resolve_is_unavailable() -> None:
    client = RegistryClient("http://weact-no-such-host.invalid:8000")
    with client, pytest.raises(errors.RegistryUnavailableError, match="no-such-host"):
        client.list_capabilities()


def test_a_reset_connection_is_unavailable(raw_server: Callable[[Handler], str]) -> None:
    with RegistryClient(raw_server(reset)) as client:
        with pytest.raises(errors.RegistryUnavailableError) as caught:
            client.list_backbones()
    assert type(caught.value) is errors.RegistryUnavailableError
    assert isinstance(caught.value.__cause__, httpx.TransportError)


def test_no_answer_in_time_is_a_timeout(raw_server: Callable[[Handler], str]) -> None:
    with RegistryClient(raw_server(silent), timeout=0.2) as client:
        with pytest.raises(errors.RegistryTimeoutError) as caught:
            client.healthz()
    assert isinstance(caught.value, TimeoutError)
    assert isinstance(caught.value, errors.RegistryUnavailableError)
    assert isinstance(caught.value.__cause__, httpx.ReadTimeout)


def test_a_long_poll_without_an_answer_is_a_timeout(raw_server: Callable[[Handler], str]) -> None:
    with RegistryClient(raw_server(silent), timeout=0.1) as client:
        with pytest.raises(errors.RegistryTimeoutError):
            client.wait_for_channel("prod", after=1, wait=0.1)


def test_a_body_broken_off_is_a_transfer_error_and_leaves_nothing(
    raw_server: Callable[[Handler], str], tmp_path: Path
) -> None:
    url = raw_server(answer("200 OK", b"x" * 10, length=1000, kind="application/octet-stream"))
    with RegistryClient(url) as client, pytest.raises(errors.TransferError) as caught:
        client.download_blob("a" * 64, tmp_path / "blob")
    assert isinstance(caught.value, errors.RegistryUnavailableError)
    assert "after 10 bytes" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("502 Bad Gateway", errors.RegistryUnavailableError),
        ("503 Service Unavailable", errors.RegistryUnavailableError),
        ("504 Gateway Timeout", errors.RegistryTimeoutError),
    ],
)
def test_a_gateway_error_keeps_its_status_and_response(
    raw_server: Callable[[Handler], str], status: str, expected: type[errors.RegistryError]
) -> None:
    url = raw_server(answer(status, b"<html>upstream down</html>"))
    with RegistryClient(url) as client, pytest.raises(expected) as caught:
        client.list_channels()
    assert type(caught.value) is expected
    assert caught.value.status_code == int(status[:3])
    assert caught.value.response is not None
    assert caught.value.response.text == "<html>upstream down</html>"
    assert "upstream down" in str(caught.value)


def test_another_web_server_is_an_unexpected_response(
    raw_server: Callable[[Handler], str],
) -> None:
    url = raw_server(answer("200 OK", b"<html>welcome to nginx</html>"))
    with RegistryClient(url) as client, pytest.raises(errors.UnexpectedResponseError) as caught:
        client.list_capabilities()
    assert caught.value.status_code == 200
    assert "welcome to nginx" in str(caught.value)
    assert isinstance(caught.value.__cause__, ValueError)


@pytest.mark.parametrize("url", ["127.0.0.1:8000", "ftp://registry", "http://", "http://[::1"])
def test_a_url_that_is_not_http_is_invalid(url: str) -> None:
    with pytest.raises(errors.InvalidError, match="registry URL"):
        RegistryClient(url)


# Minimal arguments of every public method; the test below fails when a method is added
# without an entry here, so no endpoint escapes the check.
def _calls(tmp_path: Path) -> dict[str, Callable[[RegistryClient], Any]]:
    adapter_dir = tmp_path / "adapter"
    adapter_dir.mkdir()
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        (adapter_dir / name).write_bytes(b"{}")
    blob = adapter_dir / "adapter_config.json"
    d = "a" * 64
    return {
        "healthz": lambda c: c.healthz(),
        "metrics": lambda c: c.metrics(),
        "create_token": lambda c: c.create_token(name="n", role="reader"),
        "list_tokens": lambda c: c.list_tokens(),
        "revoke_token": lambda c: c.revoke_token(1),
        "rebind_node": lambda c: c.rebind_node("gpu-1", 1),
        "tag_adapter": lambda c: c.tag_adapter(1, {"k": "v"}),
        "add_signature": lambda c: c.add_signature(1, {"payload": "", "signatures": []}),
        "list_signatures": lambda c: c.list_signatures(1),
        "sign_approval": lambda c: c.sign_approval(1, CryptoSigner.generate_ed25519()),
        "upload_blob": lambda c: c.upload_blob(blob),
        "upload_bytes": lambda c: c.upload_bytes(b"x"),
        "blob_exists": lambda c: c.blob_exists(d),
        "download_blob": lambda c: c.download_blob(d, tmp_path / "blob"),
        "get_blob": lambda c: c.get_blob(d),
        "register_backbone": lambda c: c.register_backbone(name="b", manifest={"tensors": []}),
        "list_backbones": lambda c: c.list_backbones(),
        "get_backbone": lambda c: c.get_backbone(1),
        "create_capability": lambda c: c.create_capability(name="plan", description="d"),
        "list_capabilities": lambda c: c.list_capabilities(),
        "get_capability": lambda c: c.get_capability("plan"),
        "register_adapter": lambda c: c.register_adapter(capability="p", backbone=d, files={}),
        "push_adapter": lambda c: c.push_adapter(adapter_dir, capability="plan", backbone=d),
        "list_adapters": lambda c: c.list_adapters(),
        "get_adapter": lambda c: c.get_adapter(1),
        "adapter_by_name": lambda c: c.adapter_by_name("write@2"),
        "resolve_adapter": lambda c: c.resolve_adapter("write@2"),
        "lineage": lambda c: c.lineage(1),
        "approve": lambda c: c.approve(1),
        "reject": lambda c: c.reject(1),
        "revoke": lambda c: c.revoke(1),
        "pull_adapter": lambda c: c.pull_adapter(1, tmp_path / "pulled"),
        "pull_files": lambda c: c.pull_files({"adapter_config.json": d}, tmp_path / "files"),
        "create_benchmark": lambda c: c.create_benchmark(
            name="b",
            version=1,
            dataset_digest=d,
            scope="plan",
            metric="m",
            direction="higher",
            tolerance=0.0,
        ),  # fmt: skip
        "create_evaluation": lambda c: c.create_evaluation(
            benchmark="b", benchmark_version=1, score=1.0, n=1, adapter_id=1
        ),
        "list_benchmarks": lambda c: c.list_benchmarks(),
        "list_evaluations": lambda c: c.list_evaluations(),
        "get_evaluation": lambda c: c.get_evaluation(1),
        "list_channels": lambda c: c.list_channels(),
        "get_channel": lambda c: c.get_channel("prod"),
        "channel_revisions": lambda c: c.channel_revisions("prod"),
        "wait_for_channel": lambda c: c.wait_for_channel("prod", after=0, wait=0.1),
        "gate": lambda c: c.gate("prod", {"plan": 1}),
        "promote": lambda c: c.promote("prod", {"plan": 1}),
        "rollback": lambda c: c.rollback("prod", to_revision=1),
        "require_benchmarks": lambda c: c.require_benchmarks("prod", ["research-em"]),
        "heartbeat": lambda c: c.heartbeat("n", channel="prod", revision=None, audit={}),
        "report_node_event": lambda c: c.report_node_event(
            "n", kind="integrity.refused", adapter="write@1", detail="root differs"
        ),
        "list_nodes": lambda c: c.list_nodes(),
        "adapter_states": lambda c: c.adapter_states([1, 2]),
        "list_events": lambda c: c.list_events(),
        "verify_events": lambda c: c.verify_events(),
        "channel_revision": lambda c: c.channel_revision("prod", 1),
        "sign_channel_revision": lambda c: c.sign_channel_revision(
            "prod", 1, CryptoSigner.generate_ed25519()
        ),
        "revision_metadata": lambda c: c.revision_metadata("prod", 1),
        "channel_timestamp": lambda c: c.channel_timestamp("prod"),
        "get_trust": lambda c: c.get_trust(),
        "get_trust_root": lambda c: c.get_trust_root(),
        "publish_trust_root": lambda c: c.publish_trust_root({"signed": {}, "signatures": []}),
    }


NOT_ENDPOINTS = {"close", "channel_watch"}  # channel_watch: its own test below


def test_no_method_lets_a_transport_error_through(tmp_path: Path) -> None:
    public = {
        name
        for name, _ in inspect.getmembers(RegistryClient, inspect.isfunction)
        if not name.startswith("_")
    }
    calls = _calls(tmp_path)
    assert public - NOT_ENDPOINTS == set(calls), "add the new method to _calls"
    url = f"http://127.0.0.1:{closed_port()}"
    with RegistryClient(url, "t", timeout=2) as client:
        for name, call in calls.items():
            with pytest.raises(errors.RegistryUnavailableError) as caught:
                call(client)
            assert isinstance(caught.value.__cause__, httpx.ConnectError), name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adapter"]  # nothing half-written


def test_the_cancellable_long_poll_lets_no_transport_error_through() -> None:
    import asyncio

    async def main() -> None:
        with RegistryClient(f"http://127.0.0.1:{closed_port()}", "t", timeout=2) as client:
            async with client.channel_watch() as watch:
                await watch.wait("prod", after=0, wait=0.1)

    with pytest.raises(errors.RegistryUnavailableError, match="cannot reach the registry"):
        asyncio.run(main())


def test_the_long_poll_retries_once_on_a_connection_dropped_before_any_answer() -> None:
    import asyncio

    import httpx

    from registry.client.watch import ChannelWatch

    attempts: list[str] = []

    def dropping(times: int):
        def handler(request: httpx.Request) -> httpx.Response:
            attempts.append(str(request.url))
            if len(attempts) <= times:
                raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
            return httpx.Response(304)

        return handler

    async def main(times: int) -> object:
        transport = httpx.MockTransport(dropping(times))
        async with ChannelWatch("http://registry.test", "t", transport=transport) as watch:
            return await watch.wait("prod", after=3, wait=1)

    assert asyncio.run(main(1)) is None  # the second attempt answered
    assert len(attempts) == 2
    attempts.clear()
    with pytest.raises(errors.RegistryUnavailableError, match="cannot reach the registry"):
        asyncio.run(main(2))  # dropped twice: a typed error, no third try
    assert len(attempts) == 2


def _flaky(failures: int, calls: list[str]) -> httpx.MockTransport:
    """503 `unavailable` (Retry-After: 0) for the first `failures` requests, then 200."""

    def serve(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        if len(calls) <= failures:
            body = {"error": "unavailable", "detail": "database restarting"}
            return httpx.Response(503, json=body, headers={"Retry-After": "0"})
        return httpx.Response(200, json=[])

    return httpx.MockTransport(serve)


def test_an_idempotent_request_is_retried_through_503() -> None:
    calls: list[str] = []
    with RegistryClient("http://registry.test", "t", transport=_flaky(3, calls)) as client:
        assert client.list_capabilities() == []
    assert calls == ["GET"] * 4


def test_retries_give_up_with_the_typed_error() -> None:
    calls: list[str] = []
    client = RegistryClient("http://registry.test", "t", transport=_flaky(99, calls), retries=2)
    with client, pytest.raises(errors.RegistryUnavailableError) as caught:
        client.list_capabilities()
    assert caught.value.status_code == 503
    assert calls == ["GET"] * 3


def test_a_post_is_never_repeated() -> None:
    calls: list[str] = []
    with RegistryClient("http://registry.test", "t", transport=_flaky(1, calls)) as client:
        with pytest.raises(errors.RegistryUnavailableError):
            client.create_capability(name="plan", description="d")
    assert calls == ["POST"]


def test_the_clients_of_a_process_build_one_tls_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading the CA bundle costs about 20 ms of CPU: once per process, not per client."""
    built: list[ssl.SSLContext] = []
    default = ssl.create_default_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        built.append(context := default(*args, **kwargs))
        return context

    monkeypatch.setattr(ssl, "create_default_context", counted)
    tls_context.cache_clear()
    try:
        clients = [RegistryClient("https://registry.example:8443", "t") for _ in range(3)]
        watch = ChannelWatch("https://registry.example:8443", "t")
        assert len(built) == 1
        assert built[0] is tls_context()
        assert (built[0].verify_mode, built[0].check_hostname) == (ssl.CERT_REQUIRED, True)
        for client in clients:
            client.close()
        asyncio.run(watch.aclose())
    finally:
        tls_context.cache_clear()
