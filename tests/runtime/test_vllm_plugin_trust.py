"""The vLLM plugin with a root of trust (`WEACT_ROOT`), without vLLM: a real `weact serve`
over HTTP, its database and blob store written directly by an attacker, and the plugin's
own resolver, follower and load check (issue 28).

The registry breached: an attacker adapter registered through the registry's own services
(no API, no auth), marked approved with correct digests, signature rows claiming the
trusted keys' ids (signed by the attacker's key), and set as the channel head. A plugin
without a root makes it loadable; with the root the revision is refused, the channel name
keeps its last verified version, the heartbeat says why, and a signed promote is followed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("safetensors")

from sqlalchemy import update  # noqa: E402

from registry.client import RegistryClient  # noqa: E402
from registry.db.models import SqlAdapterSignature, SqlAdapterVersion  # noqa: E402
from registry.db.session import Database, session_scope  # noqa: E402
from registry.domain import Principal, Role  # noqa: E402
from registry.launcher import EmbeddedRegistry, embedded_registry  # noqa: E402
from registry.services import adapters as adapter_services  # noqa: E402
from registry.services.channels import PromoteRequest, promote  # noqa: E402
from registry.trust import (  # noqa: E402
    APPROVE,
    PUBLISH,
    TrustRoot,
    create_key,
    load_public_key,
    load_signer,
    sign_identity,
)
from registry.trust.statements import AdapterIdentity  # noqa: E402
from runtime.tiny import build_tiny_adapter  # noqa: E402
from runtime.vllm_resolver.follower import ServedFollower  # noqa: E402
from runtime.vllm_resolver.integrity import IntegrityRefused, LoadVerifier  # noqa: E402
from runtime.vllm_resolver.policy import ServedName  # noqa: E402
from runtime.vllm_resolver.served import ServedTable  # noqa: E402
from runtime.vllm_resolver.settings import PluginSettings  # noqa: E402
from runtime.vllm_resolver.source import RegistrySource, ResolveRefused  # noqa: E402
from runtime.vllm_resolver.trust import Trust  # noqa: E402
from storage.local import LocalBlobStore  # noqa: E402
from storage.manifest import manifest_of_file, manifest_of_path  # noqa: E402

WEIGHTS = "adapter_model.safetensors"
CONFIG = "adapter_config.json"
KEYS = ("admin", "publisher", "approver", "mallory")


@dataclass
class World:
    server: EmbeddedRegistry
    keys: Path
    root: TrustRoot
    admin: RegistryClient
    publisher: RegistryClient
    approver: RegistryClient
    backbone: Path
    backbone_root: str
    adapters: Path

    def signer(self, name: str) -> Any:
        return load_signer(self.keys / f"{name}.key")

    def node(self) -> RegistryClient:
        token = self.admin.create_token(name="vllm", role="node")["token"]
        return RegistryClient(self.server.url, token)

    def publish(self, seed: int) -> dict[str, Any]:
        """A tiny `write` adapter signed by the publisher and approver keys, approved."""
        path = build_tiny_adapter(self.backbone, self.adapters / f"write-{seed}", seed=seed)
        pushed = self.publisher.push_adapter(
            path, capability="write", backbone=self.backbone_root, signer=self.signer("publisher")
        )
        self.approver.sign_approval(pushed["id"], self.signer("approver"))
        return dict(self.approver.approve(pushed["id"]))

    def promote(self, adapter: Mapping[str, Any]) -> int:
        done = self.approver.promote(
            "prod", {"write": adapter["id"]}, backbone=self.backbone_root, create=True
        )
        return int(done["revision"]["revision"])

    def breach(self, seed: int) -> tuple[int, str, int]:
        """The attacker's adapter, approved and set as prod's head by writing the database
        and blob store directly: (its id, its manifest root, the revision)."""
        directory = build_tiny_adapter(self.backbone, self.adapters / f"evil-{seed}", seed=seed)
        store = LocalBlobStore(self.server.store_url)
        files = {name: store.put([(directory / name).read_bytes()]) for name in (CONFIG, WEIGHTS)}
        intruder = Principal(name="db-intruder", role=Role.ADMIN)
        draft = adapter_services.AdapterDraft(
            capability="write", backbone=self.backbone_root, files=files
        )
        database = Database(self.server.database_url)
        try:
            evil = adapter_services.register_adapter(
                database=database, store=store, actor=intruder, draft=draft
            )
        finally:
            database.dispose()
        with session_scope(self.server.database_url) as session:
            session.execute(
                update(SqlAdapterVersion)
                .where(SqlAdapterVersion.id == evil.id)
                .values(state="approved")
            )
            identity = AdapterIdentity(
                "write", evil.manifest_root, self.backbone_root, None, files[CONFIG]
            )
            for kind, predicate, claimed in (
                ("publish", PUBLISH, "publisher"),
                ("approve", APPROVE, "approver"),
            ):
                envelope = sign_identity(identity, predicate, self.signer("mallory"))
                keyid = load_public_key(self.keys / f"{claimed}.pub.json").keyid
                envelope["signatures"][0]["keyid"] = keyid  # a forged claim of a trusted key
                session.add(
                    SqlAdapterSignature(
                        adapter_id=evil.id, kind=kind, keyid=keyid, envelope=envelope,
                        created_by="db-intruder",
                    )
                )  # fmt: skip
            request = PromoteRequest("prod", None, {"write": evil.id}, None)
            revision = promote(session=session, actor=intruder, request=request).revision
        return evil.id, evil.manifest_root, revision.revision


def make_root(keys: Path) -> TrustRoot:
    public = {name: load_public_key(keys / f"{name}.pub.json") for name in KEYS}
    root = TrustRoot.create([public["admin"]], threshold=1)
    root.add_key("publish:*", public["publisher"])
    root.add_key("approve:prod", public["approver"])
    root.sign(load_signer(keys / "admin.key"))
    return root


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, tiny_backbone: Path) -> Iterator[World]:
    keys = tmp_path_factory.mktemp("plugin-keys")
    for name in KEYS:
        create_key(keys, name)
    make_root(keys).save(keys / "root.json")
    with embedded_registry(tmp_path_factory.mktemp("plugin-registry")) as server:
        admin = RegistryClient(server.url, server.bootstrap_token("root", "admin"))
        token = {r: admin.create_token(name=r, role=r)["token"] for r in ("publisher", "approver")}
        manifest = manifest_of_path(tiny_backbone).to_json()
        backbone_root = admin.register_backbone(name="tiny", manifest=manifest)["root"]
        admin.create_capability(name="write", description="write it.")
        clients = [RegistryClient(server.url, token[r]) for r in ("publisher", "approver")]
        adapters = tmp_path_factory.mktemp("plugin-adapters")
        root = TrustRoot.load(keys / "root.json")
        yield World(server, keys, root, admin, *clients, tiny_backbone, backbone_root, adapters)
        for client in (admin, *clients):
            client.close()


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout, "condition not met in time"
        time.sleep(0.05)


def node_detail(world: World, node_id: str) -> str:
    return str({n["id"]: n for n in world.admin.list_nodes()}[node_id]["audit"]["detail"])


def test_a_breached_registrys_head_is_refused_and_the_last_verified_keeps_serving(
    world: World, tmp_path: Path
) -> None:
    good = world.publish(11)
    world.promote(good)
    node, base = world.node(), str(world.backbone)
    trust = Trust(lambda: node, world.root, "prod")
    source, table = RegistrySource(node, tmp_path / "signed", trust=trust), ServedTable()
    table.add(source.resolve(base, "prod/write")[0])
    assert source.resolve(base, good["name"])[0].version == good["name"]  # signed: served
    dropped: list[Mapping[str, ServedName]] = []
    follower = ServedFollower(
        lambda: node, table, dropped.append, mode="no", library_dir=tmp_path / "signed",
        node_id="vllm-rooted", channel="prod", check_s=0.2, wait_s=5, heartbeat_s=60,
        trust=trust,
    )  # fmt: skip
    follower.start()
    try:
        time.sleep(0.5)  # the long-poll is waiting
        evil_id, evil_root, attack = world.breach(77)
        eventually(lambda: "prod" in trust.refusals())
        eventually(lambda: "not trusted" in node_detail(world, "vllm-rooted"))
        assert f"prod revision {attack}" in trust.refusals()["prod"]
        assert "0 of 1 publish signature(s)" in trust.refusals()["prod"]
        time.sleep(0.5)  # a few state checks: nothing moves
        assert dropped == []
        assert set(table.snapshot()) == {"prod/write"}
        binding, path = source.resolve(base, "prod/write")  # a fresh resolve: the last verified
        assert binding.version == good["name"]
        assert manifest_of_file(path / WEIGHTS).root == good["manifest_root"]
        evil = node.get_adapter(evil_id)
        with pytest.raises(ResolveRefused, match="not signed as an adapter of channel 'prod'"):
            source.resolve(base, evil["name"])
        assert not (tmp_path / "signed" / evil["name"]).exists()
        with pytest.raises(ResolveRefused, match="serves channel 'prod' .*not 'staging'"):
            source.resolve(base, "staging/write")
        verifier = LoadVerifier(lambda: node, tmp_path / "signed", "vllm-rooted", trust=trust)
        with pytest.raises(IntegrityRefused, match="0 of 1 publish"):
            verifier.expected(evil["name"])

        # without a root the same registry is believed: the attack works there
        plain = RegistrySource(node, tmp_path / "plain")
        binding, path = plain.resolve(base, "prod/write")
        assert binding.version == evil["name"]
        assert manifest_of_file(path / WEIGHTS).root == evil_root

        better = world.publish(12)  # a signed promote is followed again
        world.promote(better)
        eventually(lambda: bool(dropped))
        assert set(dropped[0]) == {"prod/write"}
        assert trust.refusals() == {}
        assert source.resolve(base, "prod/write")[0].version == better["name"]
        follower.heartbeat()
        assert "refused" not in node_detail(world, "vllm-rooted")
    finally:
        follower.stop()
        node.close()


def test_a_channel_never_verified_is_refused(world: World, tmp_path: Path) -> None:
    node = world.node()
    try:
        world.breach(78)  # prod's head: the attacker's, and this process verified nothing
        source = RegistrySource(node, tmp_path, trust=Trust(lambda: node, world.root))
        with pytest.raises(ResolveRefused, match="not trusted.*0 of 1 publish"):
            source.resolve(str(world.backbone), "prod/write")
        assert list(tmp_path.iterdir()) == []
    finally:
        node.close()


def test_the_root_setting(world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WEACT_VLLM_ROOT", raising=False)
    monkeypatch.delenv("WEACT_ROOT", raising=False)
    assert PluginSettings().trust_root() is None  # no root: the registry's word, as before
    monkeypatch.setenv("WEACT_ROOT", str(world.keys / "root.json"))
    loaded = PluginSettings().trust_root()
    assert loaded is not None
    assert loaded.version == world.root.version
    unsigned = tmp_path / "root.json"
    TrustRoot.create([load_public_key(world.keys / "admin.pub.json")], threshold=1).save(unsigned)
    monkeypatch.setenv("WEACT_VLLM_ROOT", str(unsigned))  # the plugin's own wins
    with pytest.raises(SystemExit, match="refusing to start: root of trust .*WEACT_ROOT"):
        PluginSettings().trust_root()
    monkeypatch.setenv("WEACT_VLLM_ROOT", str(tmp_path / "missing.json"))
    with pytest.raises(SystemExit, match="missing.json"):
        PluginSettings().trust_root()
