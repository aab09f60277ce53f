"""The vLLM registry plugin's registry side, without vLLM: the registry over real HTTP,
tiny adapters on disk. Resolving under the serve policy, the follower's drops, deletions and
heartbeat, and the load check's decisions (refuse, report, re-pull, retry)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("safetensors")

from support.serving import InProcessRegistry  # noqa: E402

from registry.client import RegistryClient  # noqa: E402
from runtime.vllm_resolver.follower import ServedFollower, heads_of  # noqa: E402
from runtime.vllm_resolver.integrity import IntegrityRefused, LoadVerifier  # noqa: E402
from runtime.vllm_resolver.policy import ServedName  # noqa: E402
from runtime.vllm_resolver.served import ServedTable  # noqa: E402
from runtime.vllm_resolver.source import RegistrySource, ResolveRefused  # noqa: E402
from storage.manifest import manifest_of_file, manifest_of_path  # noqa: E402

WEIGHTS = "adapter_model.safetensors"


@dataclass
class World:
    admin: RegistryClient
    alice: RegistryClient
    bob: RegistryClient
    url: str
    root: str
    backbone: Path
    adapters: Path  # tiny adapter directories

    def node(self) -> RegistryClient:
        """A fresh node token (one node id per token)."""
        return RegistryClient(self.url, self.admin.create_token(name="n", role="node")["token"])

    def push(self, capability: str, seed: int, approve: bool = True) -> dict[str, Any]:
        from runtime.tiny import build_tiny_adapter

        path = build_tiny_adapter(self.backbone, self.adapters / f"{capability}-{seed}", seed=seed)
        pushed = self.alice.push_adapter(path, capability=capability, backbone=self.root)
        return dict(self.bob.approve(pushed["id"]) if approve else pushed)

    def promote(self, **versions: dict[str, Any]) -> int:
        ids = {c: a["id"] for c, a in versions.items()}
        result = self.bob.promote("prod", ids, backbone=self.root, create=True)
        return int(result["revision"]["revision"])


@pytest.fixture(scope="module")
def world(
    registry_server: InProcessRegistry,
    tiny_backbone: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[World]:
    admin = RegistryClient(registry_server.url, registry_server.bootstrap_token("a", "admin"))
    token = {r: admin.create_token(name=r, role=r)["token"] for r in ("publisher", "approver")}
    alice = RegistryClient(registry_server.url, token["publisher"])
    bob = RegistryClient(registry_server.url, token["approver"])
    manifest = manifest_of_path(tiny_backbone).to_json()
    root = admin.register_backbone(name="tiny-vllm-plugin", manifest=manifest)["root"]
    for name in ("pplan", "pwrite"):
        admin.create_capability(name=name, description=name)
    yield World(admin, alice, bob, registry_server.url, root, tiny_backbone,
                tmp_path_factory.mktemp("plugin-adapters"))  # fmt: skip
    for client in (admin, alice, bob):
        client.close()


def test_resolve_serves_approved_versions_and_channel_heads_only(
    world: World, tmp_path: Path
) -> None:
    write1, candidate = world.push("pwrite", 11), world.push("pwrite", 12, approve=False)
    revision = world.promote(pwrite=write1)
    node = world.node()
    source = RegistrySource(node, tmp_path)
    base = str(world.backbone)
    binding, path = source.resolve(base, "prod/pwrite")
    assert (binding.version, binding.channel, binding.revision) == (
        write1["name"],
        "prod",
        revision,
    )
    assert manifest_of_file(path / WEIGHTS).root == write1["manifest_root"]
    with pytest.raises(ResolveRefused, match="candidate.*WEACT_VLLM_SERVE_CANDIDATES=evaluation"):
        source.resolve(base, candidate["name"])
    assert not (tmp_path / candidate["name"]).exists()
    evaluation = RegistrySource(node, tmp_path, mode="evaluation")
    assert evaluation.resolve(base, candidate["name"])[0].version == candidate["name"]
    world.bob.reject(candidate["id"])
    with pytest.raises(ResolveRefused, match="rejected"):
        evaluation.resolve(base, candidate["name"])
    with pytest.raises(ResolveRefused, match="no 'pplan'"):
        source.resolve(base, "prod/pplan")


def test_the_follower_drops_revoked_and_moved_names_and_deletes_revoked_files(
    world: World, tmp_path: Path
) -> None:
    old, new = world.push("pwrite", 21), world.push("pwrite", 22)
    world.promote(pwrite=old)
    node, table = world.node(), ServedTable()
    source = RegistrySource(node, tmp_path)
    for name in ("prod/pwrite", old["name"], new["name"]):
        table.add(source.resolve(str(world.backbone), name)[0])
    dropped: list[Mapping[str, ServedName]] = []
    follower = ServedFollower(
        lambda: node, table, dropped.append, mode="no", library_dir=tmp_path,
        node_id="vllm-unit", channel="prod",
    )  # fmt: skip
    asked: list[str] = []
    get = node._get
    node._get = lambda path, **params: asked.append(path) or get(path, **params)  # type: ignore[method-assign]
    assert follower.check() == {}
    assert asked == ["/adapters/states"]  # one request for the three names' two versions
    world.promote(pwrite=new)
    moved = node.get_channel("prod")
    assert heads_of(moved, table.snapshot().values()) == {("prod", "pwrite"): new["name"]}
    assert set(follower.check(heads_of(moved, table.snapshot().values()))) == {"prod/pwrite"}
    assert (tmp_path / old["name"]).exists()  # still approved: kept
    world.bob.revoke(old["id"])
    assert set(follower.check()) == {old["name"]}
    assert [set(d) for d in dropped] == [{"prod/pwrite"}, {old["name"]}]
    assert not (tmp_path / old["name"]).exists()
    assert set(table.snapshot()) == {new["name"]}
    beat = follower.heartbeat()
    assert beat is not None
    listed = {n["id"]: n for n in world.admin.list_nodes()}["vllm-unit"]
    assert listed["audit"]["adapters"] == {new["name"]: new["manifest_root"]}
    assert "last check" in listed["audit"]["detail"]
    assert listed["stale"] is False


def _vllm_like_load(verifier: LoadVerifier, directory: Path) -> Any:
    """What vLLM's loader does, as far as the check sees it: read the tensors, build."""
    from safetensors.torch import load_file

    tensors = load_file(str(directory / WEIGHTS))
    verifier.on_tensors(tensors)
    return tensors


def test_every_load_is_checked_a_mismatch_is_refused_reported_and_pulled_again(
    world: World, tmp_path: Path
) -> None:
    good, other = world.push("pplan", 31), world.push("pplan", 32)
    node = world.node()
    source = RegistrySource(node, tmp_path)
    path = source.resolve(str(world.backbone), good["name"])[1]
    verifier = LoadVerifier(lambda: node, tmp_path, "vllm-unit-2")
    version = good["name"]
    verifier.load(version, str(path), lambda: _vllm_like_load(verifier, path))
    shutil.copyfile(source.resolve(str(world.backbone), other["name"])[1] / WEIGHTS, path / WEIGHTS)
    seen: list[str] = []

    def load() -> Any:
        seen.append(manifest_of_file(path / WEIGHTS).root)
        return _vllm_like_load(verifier, path)

    verifier.load(version, str(path), load)
    assert seen == [other["manifest_root"], good["manifest_root"]]  # refused, then re-pulled
    events = [e for e in world.admin.list_events(limit=1000) if e["subject"] == "node:vllm-unit-2"]
    assert [(e["action"], e["payload"]["adapter"]) for e in events] == [
        ("node.integrity.refused", version)
    ]
    with pytest.raises(IntegrityRefused, match="never saw"):
        verifier.load(version, str(path), lambda: None)
    world.bob.revoke(good["id"])
    shutil.copyfile(tmp_path / other["name"] / WEIGHTS, path / WEIGHTS)
    with pytest.raises(IntegrityRefused, match="revoked"):
        verifier.load(version, str(path), lambda: _vllm_like_load(verifier, path))
    assert not path.exists()
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(tmp_path / other["name"], elsewhere)
    with pytest.raises(IntegrityRefused, match="not the plugin's library"):
        verifier.load(version, str(elsewhere), lambda: _vllm_like_load(verifier, elsewhere))


def test_the_follower_long_polls_the_channels_served(world: World, tmp_path: Path) -> None:
    old, new = world.push("pwrite", 41), world.push("pwrite", 42)
    world.promote(pwrite=old)
    node, table = world.node(), ServedTable()
    source = RegistrySource(node, tmp_path)
    table.add(source.resolve(str(world.backbone), "prod/pwrite")[0])
    dropped: list[Mapping[str, ServedName]] = []
    follower = ServedFollower(
        lambda: node, table, dropped.append, mode="no", library_dir=tmp_path,
        node_id="vllm-unit-3", channel="prod", check_s=0.2, wait_s=5, heartbeat_s=60,
    )  # fmt: skip
    follower.start()
    try:
        time.sleep(1.0)  # the long-poll is waiting
        world.promote(pwrite=new)
        start = time.monotonic()
        while not dropped:
            assert time.monotonic() - start < 2.0, "the channel name was not dropped in 2 s"
            time.sleep(0.02)
    finally:
        follower.stop()
    assert not follower.running  # stopped: nothing more runs on `node`
    assert set(dropped[0]) == {"prod/pwrite"}
    # the resolver's next read is never older than what the long-poll saw
    assert source.resolve(str(world.backbone), "prod/pwrite")[0].version == new["name"]
