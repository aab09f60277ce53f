"""SIGKILL of a real `weact serve` in the middle of a write, then restart: the registry is
consistent (`weact fsck` exits 0), `weact gc` removes what the crash left behind, and the
interrupted operation succeeds when retried. Also: an upload whose client goes away leaves
nothing behind, not even until the next start.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import make_tokens, make_world
from live import live_harness

from registry.db.migrate import upgrade
from registry.db.session import Database
from registry.launcher import EmbeddedRegistry, embedded_registry

WEACT = Path(sys.executable).with_name("weact")
MIB = 1024 * 1024


def weact(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(WEACT), *args], capture_output=True, text=True, timeout=120, env=env or None
    )


def fsck_clean(server: EmbeddedRegistry) -> dict[str, Any]:
    done = weact("fsck", "--database-url", server.database_url, "--store", server.store_url,
                 "--json", env=dict(os.environ))  # fmt: skip
    assert done.returncode == 0, (done.stdout, done.stderr)
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["ok"]
    assert report["findings"] == []
    return report


def gc_now(server: EmbeddedRegistry) -> dict[str, Any]:
    done = weact("gc", "--grace", "0", "--database-url", server.database_url,
                 "--store", server.store_url, "--json", env=dict(os.environ))  # fmt: skip
    assert done.returncode == 0, (done.stdout, done.stderr)
    return dict(json.loads(done.stdout))


def big_blob(mib: int) -> tuple[str, Callable[[], Iterator[bytes]]]:
    """A blob of ``mib`` MiB streamed from one random MiB (no Content-Length: chunked)."""
    chunk = os.urandom(MIB)
    hasher = hashlib.sha256()
    for _ in range(mib):
        hasher.update(chunk)

    def stream() -> Iterator[bytes]:
        for _ in range(mib):
            yield chunk

    return hasher.hexdigest(), stream


def kill_when(server: EmbeddedRegistry, seen: Callable[[], bool], timeout: float = 60) -> None:
    """SIGKILL the server as soon as ``seen()`` holds (polled every 2 ms)."""
    deadline = time.monotonic() + timeout
    while not seen():
        assert time.monotonic() < deadline, "the moment to kill never came"
        time.sleep(0.002)
    server.process.kill()
    server.process.wait()


def put(url: str, token: str, digest: str, stream: Iterator[bytes]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.put(f"{url}/v1/blobs/{digest}", content=stream, timeout=120, headers=headers)


def upload_in_background(
    url: str, token: str, digest: str, stream: Callable[[], Iterator[bytes]]
) -> threading.Thread:
    def run() -> None:
        try:
            put(url, token, digest, stream())
        except httpx.HTTPError:
            pass  # the server died under it: that is the point

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@contextmanager
def serve(workdir: Path, database_url: str, store_url: str) -> Iterator[EmbeddedRegistry]:
    workdir.mkdir(parents=True, exist_ok=True)
    with embedded_registry(workdir, database_url, store_url) as server:
        yield server


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    upgrade(url)
    return url


def _tokens(database_url: str) -> dict[str, str]:
    db = Database(database_url)
    try:
        return make_tokens(db)
    finally:
        db.dispose()


def test_sigkill_during_a_large_upload(sqlite_url: str, tmp_path: Path) -> None:
    store = tmp_path / "blobs"
    tokens = _tokens(sqlite_url)
    digest, stream = big_blob(64)
    with serve(tmp_path / "one", sqlite_url, str(store)) as server:
        upload = upload_in_background(server.url, tokens["publisher"], digest, stream)
        kill_when(server, lambda: any((store / ".tmp").glob("put-*")))
        upload.join(30)
    leftovers = list((store / ".tmp").glob("put-*"))
    assert leftovers, "the kill came after the store's temp file was gone"

    with serve(tmp_path / "two", sqlite_url, str(store)) as server:
        fsck_clean(server)
        collected = gc_now(server)
        assert sorted(collected["temp"]) == sorted(p.name for p in leftovers)
        assert not list((store / ".tmp").glob("put-*"))
        response = put(server.url, tokens["publisher"], digest, stream())
        assert response.status_code == 201, response.text
        assert response.json() == {"digest": digest, "size": 64 * MIB}
        fsck_clean(server)


# The same on PostgreSQL under -m slow (a crash there is the server's, not the database's).
@pytest.mark.parametrize(
    "database_url",
    ["sqlite", pytest.param("postgresql", marks=[pytest.mark.postgres, pytest.mark.slow])],
    indirect=True,
)
def test_sigkill_during_promotions(database_url: str, tmp_path: Path) -> None:
    store = str(tmp_path / "blobs")
    with serve(tmp_path / "one", database_url, store) as server:
        with live_harness(server, tmp_path) as api:
            world = make_world(api)
            ids = [world.approved("write", seed=seed)["id"] for seed in range(1, 5)]
            promoted: list[int] = []

            def promote_forever() -> None:
                for n in range(10_000):
                    body = {"backbone": world.backbone, "adapters": {"write": ids[n % 4]}}
                    body["create"] = True
                    try:
                        api.request("POST", "/channels/prod/promote", "approver", json=body)
                    except httpx.HTTPError:
                        return
                    promoted.append(n)

            worker = threading.Thread(target=promote_forever, daemon=True)
            worker.start()
            kill_when(server, lambda: len(promoted) >= 15)
            worker.join(30)
            tokens = api.tokens

    with serve(tmp_path / "two", database_url, store) as server:
        fsck_clean(server)
        headers = {"Authorization": f"Bearer {tokens['approver']}"}
        head = httpx.get(f"{server.url}/v1/channels/prod", headers=headers).json()
        revisions = httpx.get(f"{server.url}/v1/channels/prod/revisions", headers=headers).json()
        assert [r["revision"] for r in revisions] == list(range(1, head["revision"] + 1))
        current = head["library"]["write"]["adapter_id"]
        body = {"adapters": {"write": next(i for i in ids if i != current)}}
        retried = httpx.post(f"{server.url}/v1/channels/prod/promote", json=body, headers=headers)
        assert retried.status_code == 201, retried.text
        assert retried.json()["revision"]["revision"] == head["revision"] + 1
        fsck_clean(server)


def test_sigkill_during_an_s3_multipart_upload(
    sqlite_url: str, s3_store_url: str, s3_client: Any, tmp_path: Path
) -> None:
    bucket = s3_store_url.removeprefix("s3://").split("/")[0]
    tokens = _tokens(sqlite_url)
    digest, stream = big_blob(24)  # above the store's 16 MiB multipart threshold

    def uploading() -> bool:
        found = s3_client.list_multipart_uploads(Bucket=bucket, Prefix="blobs/tmp/")
        return bool(found.get("Uploads"))

    with serve(tmp_path / "one", sqlite_url, s3_store_url) as server:
        upload = upload_in_background(server.url, tokens["publisher"], digest, stream)
        kill_when(server, uploading)
        upload.join(30)
    assert uploading(), "the kill came after the multipart upload ended"

    with serve(tmp_path / "two", sqlite_url, s3_store_url) as server:
        fsck_clean(server)
        collected = gc_now(server)
        assert any(name.startswith("upload:") for name in collected["temp"]), collected
        assert not uploading()
        response = put(server.url, tokens["publisher"], digest, stream())
        assert response.status_code == 201, response.text
        listed = s3_client.list_objects_v2(Bucket=bucket, Prefix="blobs/tmp/")
        assert listed.get("KeyCount", 0) == 0
        fsck_clean(server)


def _open_temp_files(pid: int) -> list[str]:
    fds = Path(f"/proc/{pid}/fd")
    targets = []
    for fd in fds.iterdir():
        try:
            targets.append(os.readlink(fd))
        except OSError:
            continue
    return [t for t in targets if "(deleted)" in t or "/put-" in t]


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc")
def test_an_upload_whose_client_goes_away_leaves_nothing(sqlite_url: str, tmp_path: Path) -> None:
    store = tmp_path / "blobs"
    tokens = _tokens(sqlite_url)
    digest, _ = big_blob(1)
    with serve(tmp_path / "one", sqlite_url, str(store)) as server:
        host, port = server.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as sock:
            head = (f"PUT /v1/blobs/{digest} HTTP/1.1\r\nHost: x\r\n"
                    f"Authorization: Bearer {tokens['publisher']}\r\n"
                    f"Content-Length: {64 * MIB}\r\n\r\n")  # fmt: skip
            sock.sendall(head.encode())
            sock.sendall(os.urandom(24 * MIB))  # well past the in-memory spool
            time.sleep(0.5)
            assert _open_temp_files(server.process.pid), "the upload was not being spooled"
        deadline = time.monotonic() + 10
        while _open_temp_files(server.process.pid):
            assert time.monotonic() < deadline, _open_temp_files(server.process.pid)
            time.sleep(0.05)
        assert not list((store / ".tmp").glob("*"))
        assert httpx.get(f"{server.url}/v1/healthz").status_code == 200
