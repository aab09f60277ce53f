"""registry.client against the real app: uvicorn on a loopback port, SQLite, local blobs.

Covers the one error-mapping function (every code of the contract, and bodies without a
code), the long-poll helper, verified blob transfers and atomic adapter pulls.
"""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import factories
import httpx
import pytest
import uvicorn

from registry import errors
from registry.client import RegistryClient, raise_for_error
from registry.db.session import session_scope
from registry.services.tokens import create_token
from registry.settings import Settings

# principal (token name), role
PRINCIPALS = {
    "admin": ("admin", "admin"),
    "alice": ("alice", "publisher"),
    "alice-approver": ("alice", "approver"),
    "bob": ("bob", "approver"),
    "reader": ("rita", "reader"),
}


@dataclass
class LiveRegistry:
    url: str
    database_url: str
    tokens: dict[str, str]
    clients: list[RegistryClient]

    def client(self, who: str | None = None, timeout: float = 10.0) -> RegistryClient:
        client = RegistryClient(self.url, self.tokens[who] if who else None, timeout=timeout)
        self.clients.append(client)
        return client


def _serve_in_thread(settings: Settings) -> tuple[uvicorn.Server, threading.Thread, str]:
    from registry.app import create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(settings), log_level="warning", ws="none", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    return server, thread, f"http://127.0.0.1:{port}"


def make_settings(tmp_path: Path, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "database_url": f"sqlite:///{tmp_path / 'registry.db'}",
        "store_url": str(tmp_path / "blobs"),
        "long_poll_interval_s": 0.05,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture
def live_factory(tmp_path: Path, sqlite_template: Path) -> Iterator[Callable[..., LiveRegistry]]:
    """Start a registry over `Settings` overrides; stopped (with its clients) at teardown."""
    running: list[tuple[uvicorn.Server, threading.Thread, LiveRegistry]] = []

    def start(**overrides: object) -> LiveRegistry:
        shutil.copyfile(sqlite_template, tmp_path / "registry.db")  # migrated to head
        settings = make_settings(tmp_path, **overrides)
        tokens = {}
        with session_scope(settings.database_url) as session:
            for who, (name, role) in PRINCIPALS.items():
                tokens[who] = create_token(session=session, name=name, role=role)[1]
        server, thread, url = _serve_in_thread(settings)
        live = LiveRegistry(url, settings.database_url, tokens, [])
        running.append((server, thread, live))
        return live

    yield start
    for server, thread, live in running:
        for client in live.clients:
            client.close()
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def live(live_factory: Callable[..., LiveRegistry]) -> LiveRegistry:
    return live_factory()


@dataclass
class World:
    """A backbone, the plan/write capabilities and adapter directories on disk."""

    backbone_root: str
    adapter_dirs: dict[str, Path]


@pytest.fixture
def world(live: LiveRegistry, tmp_path: Path) -> World:
    admin = live.client("admin")
    backbone = factories.write_backbone(tmp_path / "backbone")
    root = admin.register_backbone(
        name="tiny", manifest=factories.backbone_manifest_json(backbone)
    )["root"]
    for order, name in enumerate(("plan", "write")):
        admin.create_capability(name=name, description=f"{name} things", order=order)
    dirs = {
        label: factories.write_adapter(tmp_path / label, seed=seed)
        for label, seed in (("plan", 1), ("write", 2), ("write2", 3))
    }
    return World(root, dirs)


# -- the error mapping -----------------------------------------------------------------


@pytest.mark.parametrize(("code", "status"), sorted(errors.ERROR_CODE_TO_HTTP_STATUS.items()))
def test_every_error_code_becomes_its_typed_error(code: str, status: int) -> None:
    detail = {"checks": []} if code == "gate_failed" else f"something about {code}"
    response = httpx.Response(status, json={"error": code, "detail": detail})
    with pytest.raises(errors.RegistryError) as caught:
        raise_for_error(response)
    assert type(caught.value) is errors.ERROR_CLASSES[code]
    assert caught.value.code == code
    assert caught.value.detail == detail
    assert (caught.value.status_code, caught.value.response) == (status, response)


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (404, "<html>not here</html>", errors.NotFoundError),
        (409, "", errors.ConflictError),
        (422, "nope", errors.InvalidError),
        (500, "oops", errors.RegistryError),
        (502, "bad gateway", errors.RegistryUnavailableError),
        (503, "", errors.RegistryUnavailableError),
        (504, "gateway timeout", errors.RegistryTimeoutError),
    ],
)
def test_a_body_without_a_code_falls_back_to_the_status(
    status: int, body: str, expected: type[errors.RegistryError]
) -> None:
    response = httpx.Response(status, text=body)
    with pytest.raises(errors.RegistryError) as caught:
        raise_for_error(response)
    assert type(caught.value) is expected
    assert str(status) in str(caught.value.detail)
    assert (caught.value.status_code, caught.value.response) == (status, response)


@pytest.mark.parametrize("status", [200, 201, 204, 304, 307])
def test_success_and_redirects_do_not_raise(status: int) -> None:
    raise_for_error(httpx.Response(status))


def test_auth_errors_from_the_app(live: LiveRegistry) -> None:
    with pytest.raises(errors.UnauthorizedError):
        live.client().list_capabilities()
    with pytest.raises(errors.UnauthorizedError):
        RegistryClient(live.url, "weact_not-a-token").list_capabilities()
    with pytest.raises(errors.ForbiddenError):
        live.client("reader").create_capability(name="plan", description="d")
    assert live.client().healthz() == {"status": "ok"}


def test_not_found_conflict_and_invalid_from_the_app(live: LiveRegistry) -> None:
    admin = live.client("admin")
    with pytest.raises(errors.NotFoundError):
        admin.get_capability("nope")
    admin.create_capability(name="plan", description="d", order=0)
    with pytest.raises(errors.ConflictError):
        admin.create_capability(name="plan", description="again", order=None)
    with pytest.raises(errors.InvalidError):
        admin.register_backbone(name="bad", manifest={"root": "0" * 64, "tensors": "x"})
    assert [c["name"] for c in admin.list_capabilities()] == ["plan"]


def test_a_wrong_digest_upload_is_a_digest_mismatch(live: LiveRegistry) -> None:
    headers = {"Authorization": f"Bearer {live.tokens['alice']}"}
    response = httpx.put(f"{live.url}/v1/blobs/{'0' * 64}", content=b"hello", headers=headers)
    with pytest.raises(errors.DigestMismatchError):
        raise_for_error(response)
    assert not live.client("alice").blob_exists("0" * 64)


# -- blobs -----------------------------------------------------------------------------


def test_blob_round_trip_is_verified(live: LiveRegistry, tmp_path: Path) -> None:
    src = tmp_path / "blob.bin"
    src.write_bytes(bytes(range(256)) * 5000)
    client = live.client("alice")
    seen: list[tuple[int, int]] = []
    digest = client.upload_blob(src, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (src.stat().st_size, src.stat().st_size)
    assert client.blob_exists(digest)
    assert client.upload_blob(src) == digest  # idempotent
    out = client.download_blob(digest, tmp_path / "copy.bin")
    assert out.read_bytes() == src.read_bytes()
    assert client.get_blob(digest) == src.read_bytes()
    with pytest.raises(errors.NotFoundError):
        client.download_blob("a" * 64, tmp_path / "missing.bin")
    assert not (tmp_path / "missing.bin").exists()


def test_an_oversized_upload_is_refused(
    live_factory: Callable[..., LiveRegistry], tmp_path: Path
) -> None:
    live = live_factory(max_body_bytes=1000)
    src = tmp_path / "big.bin"
    src.write_bytes(b"x" * 5_000_000)
    client = live.client("alice")
    with pytest.raises(errors.PayloadTooLargeError):
        client.upload_blob(src)
    assert not client.blob_exists(factories.sha256_bytes(src.read_bytes()))


def _tamper(tmp_path: Path, digest: str) -> None:
    """Flip the last byte of a blob in the local store of `make_settings(tmp_path)`."""
    from storage.local import LocalBlobStore

    path = LocalBlobStore(tmp_path / "blobs").path_of(digest)
    data = path.read_bytes()
    path.chmod(0o644)
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))


def test_a_large_blob_streams_whole_hashed_once(
    live: LiveRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past SERVE_FROM_MEMORY a blob is read and hashed once, while it streams."""
    from registry.services import blobs
    from storage.local import LocalBlobStore

    src = tmp_path / "big.bin"
    src.write_bytes(bytes(range(256)) * (blobs.SERVE_FROM_MEMORY // 256 + 4096))
    client = live.client("alice")
    digest = client.upload_blob(src)
    opened: list[str] = []
    real = LocalBlobStore._open_raw
    monkeypatch.setattr(LocalBlobStore, "_open_raw", lambda s, d: opened.append(d) or real(s, d))

    out = client.download_blob(digest, tmp_path / "copy.bin")

    assert out.read_bytes() == src.read_bytes()
    assert opened == [digest]  # one read of the stored bytes: no verification pass first


def test_a_tampered_large_blob_is_broken_off_and_audited(
    live: LiveRegistry, tmp_path: Path
) -> None:
    """Its last piece is held back until the digest is checked: no client gets it whole."""
    from registry.services import blobs

    src = tmp_path / "big.bin"
    src.write_bytes(bytes(range(256)) * (blobs.SERVE_FROM_MEMORY // 256 + 4096))
    client = live.client("alice")
    digest = client.upload_blob(src)
    _tamper(tmp_path, digest)

    headers = {"Authorization": f"Bearer {live.tokens['reader']}"}
    with httpx.stream("GET", f"{live.url}/v1/blobs/{digest}", headers=headers) as response:
        assert response.status_code == 200
        received = bytearray()

        def read_all() -> None:
            for chunk in response.iter_raw():
                received.extend(chunk)

        with pytest.raises(httpx.RemoteProtocolError):
            read_all()
    assert len(received) < src.stat().st_size
    with pytest.raises((errors.TransferError, errors.DigestMismatchError)):
        client.download_blob(digest, tmp_path / "copy.bin")
    assert not (tmp_path / "copy.bin").exists()
    corrupt = [e for e in live.client("reader").list_events(limit=1000)
               if e["action"] == "blob.corrupt"]  # fmt: skip
    assert [(e["subject"], e["actor"]) for e in corrupt] == [(f"blob:{digest}", "rita")] + [
        (f"blob:{digest}", "alice")
    ]
    assert live.client("reader").verify_events()["ok"]


def test_a_corrupted_download_leaves_nothing(tmp_path: Path) -> None:
    good = b"the real bytes"
    digest = factories.sha256_bytes(good)

    def serve(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"the fake bytes")

    client = RegistryClient("http://registry.test", "t", transport=httpx.MockTransport(serve))
    with pytest.raises(errors.DigestMismatchError):
        client.download_blob(digest, tmp_path / "blob")
    assert list(tmp_path.iterdir()) == []


def test_download_follows_a_redirect_to_a_presigned_url(
    live_factory: Callable[..., LiveRegistry], s3_store_url: str, tmp_path: Path
) -> None:
    live = live_factory(store_url=s3_store_url, presign_threshold_bytes=0)
    src = tmp_path / "big.bin"
    src.write_bytes(b"x" * 100_000)
    client = live.client("alice")
    digest = client.upload_blob(src)
    raw = httpx.get(
        f"{live.url}/v1/blobs/{digest}",
        headers={"Authorization": f"Bearer {live.tokens['alice']}"},
    )
    assert raw.status_code == 307
    assert client.download_blob(digest, tmp_path / "copy.bin").read_bytes() == src.read_bytes()


# -- adapters --------------------------------------------------------------------------


def test_states_of_many_versions_come_a_chunk_per_request(
    live: LiveRegistry, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    from registry.client import endpoints

    alice = live.client("alice")
    plan = alice.push_adapter(world.adapter_dirs["plan"], capability="plan")
    writes = [
        alice.push_adapter(world.adapter_dirs[d], capability="write") for d in ("write", "write2")
    ]
    live.client("bob").approve(plan["id"])
    monkeypatch.setattr(endpoints, "STATES_PER_REQUEST", 2)
    reader, asked = live.client("reader"), []
    get = reader._get
    reader._get = lambda path, **params: asked.append(params["id"]) or get(path, **params)  # type: ignore[method-assign]
    ids = [writes[1]["id"], plan["id"], 999, writes[0]["id"], plan["id"]]
    expected = {plan["id"]: "approved", writes[0]["id"]: "candidate", writes[1]["id"]: "candidate"}
    assert reader.adapter_states(ids) == expected
    assert asked == [sorted(expected)[:2], [sorted(expected)[2], 999]]
    assert reader.adapter_states([]) == {}


def test_push_then_pull_gives_identical_files(
    live: LiveRegistry, world: World, tmp_path: Path
) -> None:
    pushed = live.client("alice").push_adapter(world.adapter_dirs["plan"], capability="plan")
    assert pushed["backbone"] == world.backbone_root  # the only backbone, found by the client
    assert pushed["state"] == "candidate"
    reader = live.client("reader")
    target = reader.pull_adapter(pushed["id"], tmp_path / "pulled" / "plan")
    assert factories.adapter_files(target) == factories.adapter_files(world.adapter_dirs["plan"])
    assert sorted(p.name for p in target.iterdir()) == sorted(factories.adapter_files(target))
    assert [p.name for p in target.parent.iterdir()] == ["plan"]  # no staging left


def test_pull_refuses_a_non_empty_target_and_changes_nothing(
    live: LiveRegistry, world: World, tmp_path: Path
) -> None:
    pushed = live.client("alice").push_adapter(world.adapter_dirs["plan"], capability="plan")
    target = tmp_path / "busy"
    target.mkdir()
    (target / "mine.txt").write_text("keep me")
    with pytest.raises(FileExistsError):
        live.client("reader").pull_adapter(pushed["id"], target)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".busy")] == []
    assert [p.name for p in target.iterdir()] == ["mine.txt"]
    with pytest.raises(errors.NotFoundError):
        live.client("reader").pull_adapter(9999, tmp_path / "nothing")
    assert not (tmp_path / "nothing").exists()


def test_push_of_a_directory_without_peft_files_is_invalid(
    live: LiveRegistry, world: World, tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(errors.InvalidError, match="adapter_config.json"):
        live.client("alice").push_adapter(tmp_path / "empty", capability="plan")
    assert live.client("reader").list_adapters()["total"] == 0


def test_lifecycle_errors_from_the_app(live: LiveRegistry, world: World, tmp_path: Path) -> None:
    alice, bob = live.client("alice"), live.client("bob")
    wrong = factories.write_adapter(
        tmp_path / "wrong", shapes={"model.layers.0.self_attn.q_proj.weight": (7, 5)}
    )
    with pytest.raises(errors.IncompatibleAdapterError):
        alice.push_adapter(wrong, capability="plan")
    plan = alice.push_adapter(world.adapter_dirs["plan"], capability="plan")
    with pytest.raises(errors.ForbiddenError):
        live.client("alice-approver").approve(plan["id"])  # same principal
    assert bob.approve(plan["id"])["state"] == "approved"
    with pytest.raises(errors.InvalidStateError):
        bob.approve(plan["id"])
    with pytest.raises(errors.NotFoundError, match="does not exist"):
        bob.promote("prod", {"plan": plan["id"]}, backbone=world.backbone_root)
    bob.promote("prod", {"plan": plan["id"]}, backbone=world.backbone_root, create=True)
    with pytest.raises(errors.RevisionConflictError):
        bob.promote("prod", {"plan": plan["id"]}, expected_revision=7)
    assert [r["revision"] for r in bob.channel_revisions("prod")] == [1]


def test_a_failed_gate_carries_its_report(live: LiveRegistry, world: World) -> None:
    alice, bob = live.client("alice"), live.client("bob")
    ids = {}
    for label, cap in (("plan", "plan"), ("write", "write"), ("write2", "write")):
        ids[label] = alice.push_adapter(world.adapter_dirs[label], capability=cap)["id"]
        bob.approve(ids[label])
    first = bob.promote("prod", {"plan": ids["plan"], "write": ids["write"]}, create=True)[
        "revision"
    ]
    bob.create_benchmark(
        name="old-tasks",
        version=1,
        dataset_digest="d" * 64,
        scope="library",
        metric="accuracy",
        direction="higher",
        tolerance=0.01,
    )
    bob.create_evaluation(
        benchmark="old-tasks",
        benchmark_version=1,
        library_digest=first["library_digest"],
        score=0.9,
        n=100,
    )
    candidate = {"plan": ids["plan"], "write": ids["write2"]}
    report = bob.gate("prod", candidate)
    assert report["passed"] is False
    with pytest.raises(errors.GateFailedError) as caught:
        bob.promote("prod", candidate)
    assert caught.value.detail["passed"] is False
    assert {c["verdict"] for c in caught.value.detail["checks"]} == {"missing"}
    assert bob.get_channel("prod")["revision"] == first["revision"]


# -- long-poll -------------------------------------------------------------------------


def _promoted_prod(live: LiveRegistry, world: World) -> tuple[RegistryClient, dict[str, int]]:
    alice, bob = live.client("alice"), live.client("bob")
    ids = {}
    for label, cap in (("plan", "plan"), ("write", "write"), ("write2", "write")):
        ids[label] = alice.push_adapter(world.adapter_dirs[label], capability=cap)["id"]
        bob.approve(ids[label])
    bob.promote("prod", {"plan": ids["plan"]}, backbone=world.backbone_root, create=True)
    return bob, ids


def test_long_poll_times_out_with_none(live: LiveRegistry, world: World) -> None:
    _promoted_prod(live, world)
    assert live.client("reader").wait_for_channel("prod", after=1, wait=0.3) is None


def test_long_poll_returns_at_once_when_already_newer(live: LiveRegistry, world: World) -> None:
    _promoted_prod(live, world)
    rev = live.client("reader").wait_for_channel("prod", after=0, wait=30)
    assert rev is not None
    assert rev["revision"] == 1


def test_long_poll_wakes_up_on_a_promotion(live: LiveRegistry, world: World) -> None:
    bob, ids = _promoted_prod(live, world)
    got: list[object] = []
    waiter = threading.Thread(
        target=lambda: got.append(live.client("reader").wait_for_channel("prod", after=1, wait=30))
    )
    waiter.start()
    time.sleep(0.2)
    bob.promote("prod", {"write": ids["write"]}, expected_revision=1)
    waiter.join(timeout=30)
    assert not waiter.is_alive()
    (rev,) = got
    assert isinstance(rev, dict)
    assert rev["revision"] == 2
    assert set(rev["library"]) == {"plan", "write"}


def test_long_poll_on_an_unknown_channel_is_not_found(live: LiveRegistry) -> None:
    with pytest.raises(errors.NotFoundError):
        live.client("reader").wait_for_channel("nope", after=0, wait=0.2)


# -- every other endpoint --------------------------------------------------------------


def test_every_other_method_reaches_its_route(live: LiveRegistry, world: World) -> None:
    admin, alice, bob = live.client("admin"), live.client("alice"), live.client("bob")
    assert "# TYPE weact_events" in admin.metrics()  # a token of any role (issue 25)
    node_token = admin.create_token(name="node-1", role="node")
    assert (node_token["name"], node_token["role"]) == ("node-1", "node")
    (backbone,) = admin.list_backbones()
    assert admin.get_backbone(backbone["id"]) == admin.get_backbone(backbone["root"]) == backbone
    assert admin.get_capability("write")["order"] == 1

    plan = alice.push_adapter(world.adapter_dirs["plan"], capability="plan")
    write = alice.push_adapter(world.adapter_dirs["write"], capability="write")
    assert bob.reject(write["id"], reason="not good")["state"] == "rejected"
    assert alice.list_adapters(state="rejected")["items"] == [bob.get_adapter(write["id"])]
    page = alice.list_adapters(limit=1, offset=1)
    assert (page["total"], [a["id"] for a in page["items"]]) == (2, [write["id"]])
    assert alice.list_adapters(capability="plan", backbone=world.backbone_root)["total"] == 1

    digest = alice.upload_bytes(b"items")
    bob.approve(plan["id"])
    rev = bob.promote("prod", {"plan": plan["id"]}, reason="first", create=True)["revision"]
    assert rev["reason"] == "first"
    assert [r["channel"] for r in bob.list_channels()] == ["prod"]
    bob.create_benchmark(
        name="b", version=1, dataset_digest=digest, scope="plan", metric="acc",
        direction="higher", tolerance=0.0,
    )  # fmt: skip
    alice.create_evaluation(
        benchmark="b", benchmark_version=1, adapter_id=plan["id"], score=0.5, n=3,
        items_digest=digest,
    )  # fmt: skip
    assert [b["name"] for b in alice.list_benchmarks()] == ["b"]
    assert [e["score"] for e in alice.list_evaluations(benchmark="b")] == [0.5]
    with pytest.raises(errors.InvalidError):
        alice.create_evaluation(benchmark="b", benchmark_version=1, score=1.0, n=1)

    node = RegistryClient(live.url, node_token["token"])
    live.clients.append(node)
    audit = {"ok": True, "backbone_root": world.backbone_root, "adapters": {}, "detail": None}
    beat = node.heartbeat("node-1", channel="prod", revision=rev["revision"], audit=audit)
    assert (beat["id"], beat["revision"], beat["audit_ok"]) == ("node-1", 1, True)
    assert [n["id"] for n in alice.list_nodes()] == ["node-1"]

    events = alice.list_events()
    assert [e["id"] for e in alice.list_events(after=events[1]["id"], limit=2)] == [
        e["id"] for e in events[2:4]
    ]
    assert all(e["prev_hash"] == p["hash"] for p, e in zip(events, events[1:], strict=False))
    assert alice.verify_events()["count"] == len(events)
