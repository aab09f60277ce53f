"""runtime.follow: a PeftEngine following a channel of the registry, over real HTTP from a
thread of the test process (`registry_server`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("peft")

from click.testing import CliRunner  # noqa: E402
from support.serving import InProcessRegistry  # noqa: E402

from cli.main import app  # noqa: E402
from registry.client import RegistryClient  # noqa: E402
from runtime.errors import AuditMismatchError, UnknownAdapterError  # noqa: E402
from runtime.follow import ChannelFollower  # noqa: E402
from storage.local import LocalBlobStore  # noqa: E402
from storage.manifest import manifest_of_path  # noqa: E402

ORDER = ["plan", "search", "write"]


@dataclass
class Registry:
    server: InProcessRegistry
    admin: RegistryClient
    alice: RegistryClient
    bob: RegistryClient
    node_token: str
    backbone_root: str
    adapters: dict[str, int]

    def promote(self, channel: str, adapters: dict[str, int]) -> int:
        result = self.bob.promote(
            channel, adapters, backbone=self.backbone_root, order=ORDER, create=True
        )
        return int(result["revision"]["revision"])

    def publish(self, directory: Path, capability: str, seed: int) -> dict[str, Any]:
        pushed = self.alice.push_adapter(
            directory, capability=capability, backbone=self.backbone_root, provenance={"seed": seed}
        )
        return dict(self.bob.approve(pushed["id"]))

    def node_row(self, node_id: str) -> dict[str, Any]:
        return {n["id"]: n for n in self.admin.list_nodes()}[node_id]

    def tamper(self, adapter: dict[str, Any]) -> None:
        blob = adapter["files"]["adapter_model.safetensors"]
        stored = LocalBlobStore(self.server.store_url).path_of(blob)
        data = stored.read_bytes()
        stored.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))


@pytest.fixture(scope="module")
def registry(
    registry_server: InProcessRegistry, tiny_backbone: Path, tiny_adapters: dict[str, Path]
) -> Iterator[Registry]:
    server = registry_server
    admin = RegistryClient(server.url, server.bootstrap_token("r", "admin"))
    tokens = {
        role: admin.create_token(name=name, role=role)["token"]
        for name, role in (("alice", "publisher"), ("bob", "approver"), ("nodes", "node"))
    }
    alice, bob = (
        RegistryClient(server.url, tokens["publisher"]),
        RegistryClient(server.url, tokens["approver"]),
    )
    root = admin.register_backbone(name="tiny", manifest=manifest_of_path(tiny_backbone).to_json())[
        "root"
    ]
    for order, name in enumerate(ORDER):
        admin.create_capability(name=name, description=f"{name} it.", order=order)
    reg = Registry(server, admin, alice, bob, tokens["node"], root, {})
    for seed, (capability, path) in enumerate(tiny_adapters.items(), 1):
        reg.adapters[capability] = int(reg.publish(path, capability, seed)["id"])
    yield reg
    for client in (admin, alice, bob):
        client.close()


@pytest.fixture
def node(registry: Registry) -> Iterator[RegistryClient]:
    # a node token is bound to the one node id it reports as: a fresh token per test's node
    token = registry.admin.create_token(name="nodes", role="node")["token"]
    client = RegistryClient(registry.server.url, token)
    yield client
    client.close()


@pytest.fixture
def engine(tiny_backbone: Path):  # -> PeftEngine
    from runtime.engines.peft import PeftEngine

    return PeftEngine(tiny_backbone)


@pytest.fixture
def follow(
    registry: Registry, node: RegistryClient, engine, tmp_path: Path
) -> Iterator[Callable[[str], ChannelFollower]]:
    followers: list[ChannelFollower] = []

    def start(channel: str) -> ChannelFollower:
        follower = ChannelFollower(
            node, engine, channel, f"node-{channel}", tmp_path / "lib", wait_s=2, retry_s=0.2
        )
        followers.append(follower)
        follower.start()
        return follower

    yield start
    for follower in followers:
        follower.stop()


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def new_write(registry: Registry, tiny_backbone: Path, tmp_path: Path, seed: int) -> dict[str, Any]:
    from runtime.tiny import build_tiny_adapter

    return registry.publish(
        build_tiny_adapter(tiny_backbone, tmp_path / f"w{seed}", seed), "write", seed
    )


def test_follower_swaps_new_revisions_in_for_new_episodes(
    registry: Registry, follow, engine, tiny_backbone: Path, tmp_path: Path
) -> None:
    first = registry.promote("main", registry.adapters)
    follower = follow("main")

    row = registry.node_row("node-main")
    assert (row["revision"], row["audit_ok"], follower.revision) == (first, True, first)
    assert sorted(engine.adapters) == ORDER
    old_write = engine.adapters["write"].version
    before = engine.new_session()

    adapter = new_write(registry, tiny_backbone, tmp_path, seed=51)
    second = registry.promote("main", {"write": adapter["id"]})
    eventually(lambda: registry.node_row("node-main")["revision"] == second)

    assert engine.adapters["write"].version == adapter["name"] != old_write
    assert engine.new_session().library["write"] == adapter["name"]
    assert before.library["write"] == old_write  # the open episode keeps its version
    row = registry.node_row("node-main")
    assert row["audit_ok"] is True
    assert row["audit"]["adapters"]["write"] == adapter["manifest_root"]
    assert old_write in engine.audit().adapters  # still resident for `before`
    assert follower.last_error == ""


def test_a_capability_dropped_from_the_revision_is_gone_for_new_episodes(
    registry: Registry, follow, engine
) -> None:
    """Promote without `write` (as a revoke or a rollback does): new episodes cannot load it,
    an open one finishes with it, and it is freed when that episode closes."""
    registry.promote("drop", registry.adapters)
    follower = follow("drop")
    before = engine.new_session()
    before.activate("write")
    write_version = engine.adapters["write"].version

    dropped = registry.bob.promote("drop", {"write": None}, order=["plan", "search"])["revision"][
        "revision"
    ]
    eventually(lambda: follower.revision == dropped)

    assert sorted(engine.adapters) == ["plan", "search"]
    fresh = engine.new_session()
    with pytest.raises(UnknownAdapterError, match="'write' is unavailable"):
        fresh.activate("write")
    before.deactivate()
    before.activate("write")  # the open episode keeps its library
    # the follower serves the revision first, then reports it in its heartbeat
    eventually(lambda: registry.node_row("node-drop")["revision"] == dropped)
    row = registry.node_row("node-drop")
    assert (row["revision"], row["audit_ok"]) == (dropped, True)
    assert row["audit"]["adapters"].keys() == {"plan", "search", write_version}
    assert f"resident for open episodes only: {write_version}" in row["audit"]["detail"]

    before.close()
    assert follower.release() == [write_version]
    eventually(
        lambda: registry.node_row("node-drop")["audit"]["adapters"].keys() == {"plan", "search"}
    )
    assert registry.node_row("node-drop")["audit"]["detail"] == ""


def test_a_tampered_revision_is_never_loaded(
    registry: Registry, follow, engine, tiny_backbone: Path, tmp_path: Path
) -> None:
    good = registry.promote("canary", registry.adapters)
    follower = follow("canary")
    served = dict(engine.adapters)
    adapter = new_write(registry, tiny_backbone, tmp_path, seed=52)
    registry.tamper(adapter)

    registry.promote("canary", {"write": adapter["id"]})
    eventually(lambda: "failed" in registry.node_row("node-canary")["audit"]["detail"])

    row = registry.node_row("node-canary")
    assert (row["revision"], row["audit_ok"]) == (good, True)
    assert follower.revision == good
    assert follower.running
    assert dict(engine.adapters) == served
    assert adapter["name"] not in engine.audit().adapters
    assert not any(p.name.startswith(adapter["name"]) for p in (tmp_path / "lib").iterdir())


def test_stop_ends_the_long_poll_in_flight_at_once(
    registry: Registry, node: RegistryClient, engine, tmp_path: Path
) -> None:
    registry.promote("quiet", registry.adapters)
    follower = ChannelFollower(node, engine, "quiet", "node-quiet", tmp_path, wait_s=60)
    follower.start()
    time.sleep(0.3)  # the long-poll is in flight

    started = time.monotonic()
    follower.stop()

    assert time.monotonic() - started < 2.0
    assert not follower.running  # the poll was cancelled, not abandoned for 60 s
    assert registry.node_row("node-quiet")["revision"] == follower.revision


def test_heartbeats_go_out_at_a_steady_interval(
    registry: Registry, node: RegistryClient, engine, tmp_path: Path
) -> None:
    revision = registry.promote("steady", registry.adapters)
    follower = ChannelFollower(
        node, engine, "steady", "node-steady", tmp_path, wait_s=30, heartbeat_s=0.3
    )
    follower.start()
    try:
        beats = set()
        deadline = time.monotonic() + 20
        while len(beats) < 4:
            assert time.monotonic() < deadline, "heartbeats stopped"
            beats.add(registry.node_row("node-steady")["last_heartbeat"])
            time.sleep(0.1)
    finally:
        follower.stop()
    row = registry.node_row("node-steady")
    digest = registry.admin.get_channel("steady")["library_digest"]
    assert (row["revision"], row["head"], row["lag"]) == (revision, revision, 0)
    assert (row["library_digest"], row["stale"], row["audit_ok"]) == (digest, False, True)


def test_a_node_cut_off_from_the_registry_keeps_serving_and_says_it_is_stale(
    registry: Registry, engine, tiny_backbone: Path, tmp_path: Path
) -> None:
    import httpx
    from support.proxy import TcpProxy
    from support.serving import serve

    from runtime.server import create_app

    first = registry.promote("outage", registry.adapters)
    port = int(registry.server.url.rsplit(":", 1)[1])
    with (
        TcpProxy("127.0.0.1", port) as proxy,
        RegistryClient(proxy.url, registry.node_token, timeout=5) as client,
    ):
        follower = ChannelFollower(
            client, engine, "outage", "node-outage", tmp_path / "lib", wait_s=1,
            retry_s=0.1, max_backoff_s=0.5, heartbeat_s=0.2,
        )  # fmt: skip
        follower.start()
        served = dict(engine.adapters)
        try:
            with serve(create_app(engine, source=follower)) as base:
                proxy.cut()
                eventually(lambda: follower.status().stale)
                health = httpx.get(f"{base}/healthz").json()
                assert health["status"] == "stale"
                assert health["library"]["revision"] == first
                assert dict(engine.adapters) == served  # the last verified library serves on
                episode = httpx.post(f"{base}/v1/episodes", json={"task": "x", "max_steps": 1})
                assert episode.status_code == 201

                adapter = new_write(registry, tiny_backbone, tmp_path, seed=53)
                second = registry.promote("outage", {"write": adapter["id"]})
                proxy.restore()
                eventually(lambda: follower.revision == second, timeout=20)
                eventually(lambda: not follower.status().stale)
                health = httpx.get(f"{base}/healthz").json()
            assert health["status"] == "ok"
            assert (health["library"]["revision"], health["library"]["lag"]) == (second, 0)
            eventually(lambda: registry.node_row("node-outage")["stale"] is False)
            assert registry.node_row("node-outage")["revision"] == second
        finally:
            follower.stop()


def test_start_refuses_a_backbone_other_than_the_revisions(
    registry: Registry, node: RegistryClient, tmp_path: Path
) -> None:
    from runtime.engines.peft import PeftEngine
    from runtime.tiny import build_tiny_backbone

    registry.promote("other", registry.adapters)
    other = PeftEngine(build_tiny_backbone(tmp_path / "other", seed=7))
    follower = ChannelFollower(node, other, "other", "node-other", tmp_path / "lib")

    with pytest.raises(AuditMismatchError, match="backbone"):
        follower.start()

    assert not follower.running
    row = registry.node_row("node-other")
    assert row["audit_ok"] is False


def test_a_node_on_another_backbone_is_named_by_its_roots_first(
    registry: Registry, node: RegistryClient, tmp_path: Path
) -> None:
    """A backbone of other shapes (the adapters would not even fit): the error names both
    roots in one short line before anything is pulled; the rest is in `details`."""
    from runtime.engines.peft import PeftEngine
    from runtime.errors import BackboneMismatchError
    from runtime.tiny import build_tiny_backbone

    registry.promote("wide", registry.adapters)
    directory = build_tiny_backbone(tmp_path / "wide", seed=3, hidden_size=96)
    wide = PeftEngine(directory)
    own_root = wide.audit().backbone_root
    follower = ChannelFollower(node, wide, "wide", "node-wide", tmp_path / "lib")

    with pytest.raises(BackboneMismatchError) as raised:
        follower.start()

    message = str(raised.value)
    assert message.startswith(
        f"backbone root {own_root}, channel 'wide' wants {registry.backbone_root} (revision 1)"
    )
    assert len(message) < 300
    assert raised.value.details == [
        f"this node's backbone: {directory}",
        "the channel's backbone: tiny ("
        + str(registry.admin.get_backbone(registry.backbone_root)["tensor_count"])
        + " tensors)",
    ]
    assert not (tmp_path / "lib").exists()  # nothing was pulled
    assert registry.node_row("node-wide")["audit_ok"] is False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--adapter", "plan={dir}", "--registry", "http://x", "--channel", "prod"], "exclusive"),
        (["--registry", "http://x"], "go together"),
        (["--channel", "prod", "--registry", "x:1"], "expected http(s)://HOST[:PORT]"),
    ],
)
def test_serve_takes_adapters_or_a_channel(
    tiny_backbone: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    args = [a.format(dir=tmp_path) for a in args]
    result = CliRunner().invoke(app, ["runtime", "serve", "--backbone", str(tiny_backbone), *args])
    assert result.exit_code == 2
    assert message in result.output


def test_serve_follows_a_channel(
    registry: Registry, tiny_backbone: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`serve --registry --channel` in-process: the app uvicorn gets serves the revision."""
    import httpx
    import uvicorn
    from support.serving import serve

    revision = registry.promote("cli", registry.adapters)
    seen: dict[str, Any] = {}

    def run(app: Any, host: str, port: int) -> None:
        seen["row"] = registry.node_row("cli-node")
        with serve(app) as base:
            seen["adapters"] = httpx.get(f"{base}/healthz").json()["adapters"]

    monkeypatch.setattr(uvicorn, "run", run)
    token = registry.admin.create_token(name="cli-node", role="node", node_id="cli-node")
    monkeypatch.setenv("WEACT_TOKEN", token["token"])
    monkeypatch.delenv("WEACT_RUNTIME_TOKEN", raising=False)
    args = ["--registry", registry.server.url, "--channel", "cli", "--node-id", "cli-node"]
    args += ["--library-dir", str(tmp_path / "lib"), "--poll-wait", "1"]
    result = CliRunner().invoke(app, ["runtime", "serve", "--backbone", str(tiny_backbone), *args])
    assert result.exit_code == 0, result.output
    assert (seen["row"]["revision"], seen["row"]["audit_ok"]) == (revision, True)
    assert seen["adapters"] == ORDER


@pytest.mark.parametrize("details", [False, True])
def test_serve_on_another_backbone_is_one_line_details_on_request(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, details: bool
) -> None:
    """`weact runtime serve --channel` on the wrong backbone: one line naming both roots
    (no list of tensor mismatches); WEACT_DETAILS=1 adds what they are, before it."""
    import uvicorn

    from runtime.tiny import build_tiny_backbone

    channel = f"roots{int(details)}"  # one channel per case: a second promote changes nothing
    registry.promote(channel, registry.adapters)
    wide = build_tiny_backbone(tmp_path / "wide", seed=4, hidden_size=96)
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("served"))
    token = registry.admin.create_token(name=f"roots-{details}", role="node")
    monkeypatch.setenv("WEACT_TOKEN", token["token"])
    monkeypatch.delenv("WEACT_RUNTIME_TOKEN", raising=False)
    if details:
        monkeypatch.setenv("WEACT_DETAILS", "1")
    else:
        monkeypatch.delenv("WEACT_DETAILS", raising=False)
    args = ["runtime", "serve", "--backbone", str(wide), "--registry", registry.server.url]
    args += ["--channel", channel, "--library-dir", str(tmp_path / "lib")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    progress = ("Loading weights", "Writing model")  # transformers' bars while it loads
    lines = [line for line in result.stderr.splitlines() if line and not line.startswith(progress)]
    error = lines[-1]
    assert error.startswith("Error: backbone root "), error
    assert f"channel {channel!r} wants {registry.backbone_root} (revision 1)" in error
    assert len(error) < 400
    if details:
        assert lines[:-1] == [
            f"  this node's backbone: {wide}",
            "  the channel's backbone: tiny "
            f"({registry.admin.get_backbone(registry.backbone_root)['tensor_count']} tensors)",
        ]
    else:
        assert len(lines) == 1, result.stderr
        assert error.endswith("(2 details: set WEACT_DETAILS=1)")
