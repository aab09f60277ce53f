"""Hostile and unlucky input: bounded bodies, a 500 that keeps the connection, tampered
blobs answered (and audited) instead of sent, identities instead of names, and an OpenAPI
document that promises what the server sends."""

from __future__ import annotations

import hashlib
import json
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Harness, World, build_harness, make_world

from registry.db.migrate import upgrade
from registry.launcher import embedded_registry
from registry.services.tokens import create_token

LIMIT = 4096


@pytest.fixture
def small_json_api(database_url: str, tmp_path: Path) -> Iterator[Harness]:
    yield from build_harness(database_url, str(tmp_path / "blobs"), tmp_path, max_json_bytes=LIMIT)


def test_json_bodies_are_bounded_with_and_without_content_length(
    small_json_api: Harness,
) -> None:
    api = small_json_api
    world = make_world(api)
    files = api.upload_adapter(seed=1)
    before = api.counts()
    body = api.adapter_body("write", world.backbone, files=files)
    body["provenance"]["trainer"] = {"notes": "x" * LIMIT}
    raw = json.dumps(body).encode()
    declared = api.request("POST", "/adapters", "publisher", content=raw,
                           headers={"Content-Type": "application/json"})  # fmt: skip
    assert declared.status_code == 413
    assert declared.json()["error"] == "payload_too_large"
    assert str(LIMIT) in declared.json()["detail"]

    def chunks() -> Iterator[bytes]:
        yield raw[:1000]
        yield raw[1000:]

    streamed = api.request("POST", "/adapters", "publisher", content=chunks(),
                           headers={"Content-Type": "application/json"})  # fmt: skip
    assert (streamed.status_code, streamed.json()["error"]) == (413, "payload_too_large")
    assert api.counts() == before
    del body["provenance"]["trainer"]
    assert api.ok("POST", "/adapters", "publisher", json=body)["name"] == "write@1"


def _raw_exchange(sock: socket.socket, request: bytes) -> tuple[int, bytes]:
    """Send one HTTP/1.1 request on an open socket and read one whole response."""
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    headers = dict(line.lower().split(b": ", 1) for line in head.split(b"\r\n")[1:])
    length = int(headers[b"content-length"])
    while len(body) < length:
        body += sock.recv(65536)
    return int(head.split(b" ")[1]), body


def test_a_500_keeps_the_keep_alive_connection(tmp_path: Path) -> None:
    path = tmp_path / "registry.db"
    url = f"sqlite:///{path}"
    upgrade(url)
    from registry.db.session import session_scope

    with session_scope(url) as session:
        _, token = create_token(session=session, name="root", role="admin")
    with embedded_registry(tmp_path, url, str(tmp_path / "blobs")) as server:
        with sqlite3.connect(path) as conn:  # an accident under the running server
            conn.execute("DROP TABLE events")
        host, port = server.url.removeprefix("http://").split(":")
        body = b'{"name": "code", "description": "d"}'
        post = (b"POST /v1/capabilities HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Authorization: Bearer " + token.encode() + b"\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)  # fmt: skip
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            status, answer = _raw_exchange(sock, post)
            assert status == 500
            assert json.loads(answer) == {"error": "internal", "detail": "internal server error"}
            status, answer = _raw_exchange(sock, b"GET /v1/healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (status, json.loads(answer)) == (200, {"status": "ok"})


def test_a_tampered_small_blob_is_answered_digest_mismatch_and_audited(
    sqlite_api: Harness,
) -> None:
    """Read and hashed once, before a byte is sent (a large one: test_client's
    `test_a_tampered_large_blob_is_broken_off_and_audited`)."""
    api = sqlite_api
    data = bytes(range(256)) * 4
    digest = api.put_blob(data)
    stored = api.store.path_of(digest)  # type: ignore[attr-defined]
    stored.chmod(0o644)
    stored.write_bytes(data[:-1] + b"\x00")

    detail = api.fails(422, "digest_mismatch", "GET", f"/blobs/{digest}", "reader")
    assert detail["expected"] == digest
    assert detail["actual"] == hashlib.sha256(data[:-1] + b"\x00").hexdigest()
    events = api.ok("GET", "/events?limit=1000", "reader")
    corrupt = [e for e in events if e["action"] == "blob.corrupt"]
    assert [(e["subject"], e["actor"]) for e in corrupt] == [(f"blob:{digest}", "rita")]
    assert api.ok("GET", "/events/verify", "reader")["ok"]


def test_self_approval_is_refused_by_identity_whatever_the_token_is_called(
    world: World,
) -> None:
    api = world.api
    adapter = world.adapter()  # published by principal alice
    with api.db.write() as session:
        _, ci_token = create_token(session=session, name="ci-bot", role="approver",
                                   principal="alice")  # fmt: skip
        _, other = create_token(session=session, name="alice-lookalike", role="approver")
    api.tokens["alice_ci"], api.tokens["lookalike"] = ci_token, other
    path = f"/adapters/{adapter['id']}/approve"
    assert "cannot approve" in api.fails(403, "forbidden", "POST", path, "alice_ci", json={})
    approved = api.ok("POST", path, "lookalike", json={})
    assert approved["state"] == "approved"


def test_a_node_token_reports_only_as_its_own_node(world: World) -> None:
    api = world.api
    beat = {"channel": "prod", "revision": None, "audit": {"ok": True}}
    api.ok("POST", "/nodes/gpu-1/heartbeat", "node", json=beat)  # binds on first use
    detail = api.fails(403, "forbidden", "POST", "/nodes/gpu-2/heartbeat", "node", json=beat)
    assert "gpu-1" in detail
    created = api.ok("POST", "/tokens", json={"name": "n9", "role": "node", "node_id": "gpu-9"})
    assert created["node_id"] == "gpu-9"
    api.tokens["n9"] = created["token"]
    api.fails(403, "forbidden", "POST", "/nodes/gpu-1/heartbeat", "n9", json=beat)
    api.ok("POST", "/nodes/gpu-9/heartbeat", "n9", json=beat)
    api.ok("POST", "/nodes/gpu-3/heartbeat", "admin", json=beat)  # admins are not bound
    api.fails(422, "invalid", "POST", "/tokens",
              json={"name": "r", "role": "reader", "node_id": "gpu-1"})  # fmt: skip
    nodes = [n["id"] for n in api.ok("GET", "/nodes", "reader")]
    assert nodes == ["gpu-1", "gpu-3", "gpu-9"]


def test_the_openapi_document_promises_the_one_error_shape(sqlite_api: Harness) -> None:
    spec = sqlite_api.client.get("/openapi.json").json()
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    error_ref = {"$ref": "#/components/schemas/ErrorBody"}
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            responses = operation["responses"]
            public = path == "/v1/healthz"
            expected = {"413"} if public else {"401", "413", "422"}
            if method in ("post", "put") and not public and not path.endswith("/gate"):
                expected |= {"403"}
            assert expected <= set(responses), (method, path, sorted(responses))
            for status, answer in responses.items():
                if status.startswith(("4", "5")):
                    schema = answer["content"]["application/json"]["schema"]
                    assert schema == error_ref, (method, path, status)
    for path in ("/v1/adapters/{adapter_id}/approve", "/v1/channels/{name}/promote"):
        assert {"404", "409"} <= set(spec["paths"][path]["post"]["responses"])
    metrics = spec["paths"]["/v1/metrics"]["get"]["responses"]["200"]["content"]
    assert list(metrics) == ["text/plain"]
    blob = spec["paths"]["/v1/blobs/{digest}"]["get"]["responses"]["200"]["content"]
    assert list(blob) == ["application/octet-stream"]
