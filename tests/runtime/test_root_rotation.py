"""Root rotation on nodes (issue 28): a node started with `--root` follows the root versions
its registry serves, each accepted only when the admin threshold of the version it trusts
signed it (TUF's root update), kept in its state directory, and from then on a removed
key's signatures stop counting, without a restart or a new file.

A real `weact serve --root` (SQLite and PostgreSQL), real keys, a real PeftEngine following
`prod` over HTTP. The admins revoke a compromised approver key and publish the new root
(`POST /v1/trust/root`); the node refuses the next revision that needs that key. A root
signed by the compromised key alone is refused by the registry and, written into its
database directly, by the node.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("peft")

from support.signed_world import KEYS, ORDER, eventually, make_root  # noqa: E402

from registry.client import RegistryClient  # noqa: E402
from registry.db.models import SqlTrustRoot  # noqa: E402
from registry.db.session import session_scope  # noqa: E402
from registry.errors import InvalidError, UntrustedError  # noqa: E402
from registry.launcher import EmbeddedRegistry, embedded_registry  # noqa: E402
from registry.trust import TrustRoot, create_key, load_public_key, load_signer  # noqa: E402
from runtime.follow import ChannelFollower  # noqa: E402
from runtime.root_updates import RootChain  # noqa: E402
from runtime.tiny import build_tiny_adapter  # noqa: E402
from storage.manifest import manifest_of_path  # noqa: E402


@dataclass
class World:
    server: EmbeddedRegistry
    keys: Path
    root_path: Path
    admin: RegistryClient
    alice: RegistryClient  # publisher
    bob: RegistryClient  # approver
    backbone_root: str
    adapters: dict[str, int]

    def signer(self, name: str) -> Any:
        return load_signer(self.keys / f"{name}.key")

    def keyid(self, name: str) -> str:
        return str(load_public_key(self.keys / f"{name}.pub.json").keyid)

    def publish(self, directory: Path, capability: str, approvers: tuple[str, ...]) -> int:
        pushed = self.alice.push_adapter(
            directory, capability=capability, backbone=self.backbone_root,
            signer=self.signer("publisher"),
        )  # fmt: skip
        for name in approvers:
            self.bob.sign_approval(pushed["id"], self.signer(name))
        self.bob.approve(pushed["id"])
        return int(pushed["id"])

    def promote(self, adapters: dict[str, int]) -> int:
        """A revision of `prod`, signed by approver1 (promoting) and approver2."""
        result = self.bob.promote(
            "prod", adapters, backbone=self.backbone_root, order=ORDER, create=True,
            signer=self.signer("approver1"),
        )  # fmt: skip
        number = int(result["revision"]["revision"])
        self.bob.sign_channel_revision("prod", number, self.signer("approver2"))
        return number


@pytest.fixture(scope="module")
def world(
    signed_database: str | None,
    tmp_path_factory: pytest.TempPathFactory,
    tiny_backbone: Path,
    tiny_adapters: dict[str, Path],
) -> Iterator[World]:
    keys = tmp_path_factory.mktemp("keys")
    for name in KEYS:
        create_key(keys, name)
    root_path = keys / "root.json"
    make_root(keys).save(root_path)  # no timestamp key
    workdir = tmp_path_factory.mktemp("registry")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("WEACT_TRUST_ROOT", str(root_path))  # weact serve --root root.json
        env.delenv("WEACT_STRICT", raising=False)
        with embedded_registry(workdir, database_url=signed_database) as server:
            admin = RegistryClient(server.url, server.bootstrap_token("root", "admin"))
            alice, bob = (
                RegistryClient(server.url, admin.create_token(name=n, role=r)["token"])
                for n, r in (("alice", "publisher"), ("bob", "approver"))
            )
            backbone = manifest_of_path(tiny_backbone).to_json()
            root = admin.register_backbone(name="tiny", manifest=backbone)["root"]
            for order, name in enumerate(ORDER):
                admin.create_capability(name=name, description=f"{name} it.", order=order)
            w = World(server, keys, root_path, admin, alice, bob, root, {})
            for capability, path in tiny_adapters.items():
                w.adapters[capability] = w.publish(path, capability, ("approver1", "approver2"))
            yield w
            for client in (admin, alice, bob):
                client.close()


def test_a_node_follows_a_root_rotation_and_refuses_a_forged_one(
    world: World, tiny_backbone: Path, tmp_path: Path
) -> None:
    from runtime.engines.peft import PeftEngine

    assert "development trust: root version 1;" in world.server.log.read_text()
    state = tmp_path / "node" / ".weact-trust"
    chain = RootChain.open(world.root_path, state)
    before = build_tiny_adapter(tiny_backbone, tmp_path / "before", seed=90)
    first = world.promote(
        {**world.adapters, "write": world.publish(before, "write", ("approver1", "approver3"))}
    )
    node = world.admin.create_token(name="nodes", role="node")["token"]
    client = RegistryClient(world.server.url, node)
    follower = ChannelFollower(
        client, PeftEngine(tiny_backbone), "prod", "node-rot", tmp_path / "node",
        wait_s=1, retry_s=0.2, heartbeat_s=0.5, trust=chain,
    )  # fmt: skip
    follower.start()
    try:
        assert follower.revision == first  # approver1 + approver3 meet 2 of 3 under version 1

        # approver3's key is compromised: one admin's signature is not enough to revoke it
        rotated = TrustRoot.load(world.root_path)
        rotated.revoke_key("approve:prod", world.keyid("approver3"))
        rotated.sign(world.signer("admin1"))
        with pytest.raises(UntrustedError, match="lacks 1 admin signature"):
            world.admin.publish_trust_root(rotated.metadata.to_dict())
        assert world.admin.get_trust()["versions"] == [1]
        rotated.sign(world.signer("admin2"))
        published = world.admin.publish_trust_root(rotated.metadata.to_dict())
        assert (published["version"], published["previous"]) == (2, 1)
        trust = world.admin.get_trust()
        assert (trust["versions"], trust["root"]["version"], trust["mode"]) == (
            [1, 2], 2, "development",
        )  # fmt: skip

        # the same node, not restarted: approver3's approvals stop counting
        evil = build_tiny_adapter(tiny_backbone, tmp_path / "evil", seed=91)
        attack = world.promote(
            {**world.adapters, "write": world.publish(evil, "write", ("approver1", "approver3"))}
        )
        eventually(lambda: (follower.head or 0) >= attack and "not trusted" in follower.last_error)
        assert "1 of 2 approve signature(s)" in follower.last_error
        assert "root version 2" in follower.last_error
        assert follower.revision == first
        assert chain.root.version == 2
        assert (state / "2.root.json").is_file()

        good = build_tiny_adapter(tiny_backbone, tmp_path / "good", seed=92)
        fixed = world.promote(
            {**world.adapters, "write": world.publish(good, "write", ("approver1", "approver2"))}
        )
        eventually(lambda: follower.revision == fixed)

        # a root signed by the compromised key alone (it names the attacker an approver)
        forged = TrustRoot.from_bytes(json.dumps(rotated.metadata.to_dict()).encode())
        forged.add_key("approve:prod", load_public_key(world.keys / "mallory.pub.json"))
        forged.metadata.sign(world.signer("approver3"), append=True)
        with pytest.raises(UntrustedError, match="lacks 2 admin signature"):
            world.admin.publish_trust_root(forged.metadata.to_dict())
        with pytest.raises(InvalidError):
            world.admin.publish_trust_root({"signed": {"_type": "root"}, "signatures": []})
        assert world.admin.get_trust()["versions"] == [1, 2]
        with session_scope(world.server.database_url) as session:  # the database written directly
            session.add(
                SqlTrustRoot(
                    version=3,
                    metadata_json=json.dumps(forged.metadata.to_dict()),
                    development=False,
                    created_by="db-intruder",
                )
            )
        third = build_tiny_adapter(tiny_backbone, tmp_path / "third", seed=93)
        after = world.promote(
            {**world.adapters, "write": world.publish(third, "write", ("approver1", "approver2"))}
        )
        eventually(lambda: (follower.head or 0) >= after and "refused root" in follower.last_error)
        assert "refused root version 3 served by the registry" in follower.last_error
        assert follower.revision == fixed
        assert chain.root.version == 2
        assert not (state / "3.root.json").exists()
    finally:
        follower.stop()
        client.close()

    # a restart with the same --root file resumes from the version it accepted; a file put
    # in the state directory by someone else (the forged version 3) is not taken
    assert RootChain.open(world.root_path, state).root.version == 2
    assert RootChain.open(world.root_path, None).root.version == 1
    forged.save(state / "3.root.json")
    assert RootChain.open(world.root_path, state).root.version == 2
