"""A signed-trust world for tests (issue 28): a real `weact serve` (SQLite or PostgreSQL),
keys, an offline root naming them (and the registry's timestamp key), signed adapters of
every capability, and nodes (`ChannelFollower` over a PeftEngine) that follow a channel.

tests/runtime/conftest.py makes fixtures of the generators here (`databases`, `world_of`,
`followers`): `signed_database`, `signed_world`, `signed_follow`. `breach` is the attack on
the database and blob store written directly. Timestamps expire after
`TIMESTAMP_EXPIRY_S` so a frozen registry shows within seconds.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from registry.client import ADAPTER_FILES, RegistryClient, Revision
from registry.db.models import SqlAdapterSignature, SqlAdapterVersion
from registry.db.session import Database, session_scope
from registry.domain import Principal, Role
from registry.errors import InvalidError
from registry.services import adapters as adapter_services
from registry.services.channels import PromoteRequest, promote
from registry.trust import (
    APPROVE,
    PUBLISH,
    TrustRoot,
    create_key,
    load_public_key,
    load_signer,
    sign_identity,
)
from registry.trust.statements import AdapterIdentity
from runtime.follow import ChannelFollower
from runtime.tiny import build_tiny_adapter
from storage.local import LocalBlobStore
from storage.manifest import manifest_of_path
from support.fleet import PostgresUnavailable, fresh_pg_database
from support.serving import InProcessRegistry, registry_in_process

TIMESTAMP_EXPIRY_S = 4

ORDER = ["plan", "search", "write"]
KEYS = ("admin1", "admin2", "publisher", "approver1", "approver2", "approver3", "mallory")


@dataclass
class World:
    server: InProcessRegistry
    keys: Path
    root_path: Path
    admin: RegistryClient
    alice: RegistryClient  # publisher
    bob: RegistryClient  # approver
    carol: RegistryClient  # approver
    backbone_root: str
    adapters: dict[str, int] = field(default_factory=dict)

    def signer(self, name: str) -> Any:
        return load_signer(self.keys / f"{name}.key")

    def public(self, name: str) -> Any:
        return load_public_key(self.keys / f"{name}.pub.json")

    def publish(self, directory: Path, capability: str, approvers: tuple[str, ...]) -> int:
        """Push signed by the publisher key, approval signed by `approvers`, approved."""
        pushed = self.alice.push_adapter(
            directory,
            capability=capability,
            backbone=self.backbone_root,
            signer=self.signer("publisher"),
        )
        for name in approvers:
            self.bob.sign_approval(pushed["id"], self.signer(name))
        self.bob.approve(pushed["id"])
        return int(pushed["id"])

    def promote(
        self,
        channel: str,
        adapters: dict[str, int],
        signers: tuple[str, ...] = ("approver1", "approver2"),
    ) -> int:
        """A revision serving `adapters` (the current one if it already does), signed by
        `signers`: the first as the promoting approver, the others co-signing."""
        first, *others = signers or (None,)
        try:
            result = self.bob.promote(
                channel,
                adapters,
                backbone=self.backbone_root,
                order=ORDER,
                create=True,
                signer=self.signer(first) if first else None,
            )
        except InvalidError as exc:
            if "changes nothing" not in str(exc):
                raise
            return int(self.bob.get_channel(channel)["revision"])
        number = int(result["revision"]["revision"])
        for name in others:
            self.carol.sign_channel_revision(channel, number, self.signer(name))
        return number

    def node(self) -> RegistryClient:
        return self.breached_node()

    def node_row(self, node_id: str) -> dict[str, Any]:
        """What the registry lists for node `node_id` (its heartbeat, audit and revision)."""
        return dict({n["id"]: n for n in self.admin.list_nodes()}[node_id])

    def breached_node(self) -> BreachedClient:
        token = self.admin.create_token(name="nodes", role="node")["token"]
        return BreachedClient(self.server.url, token)


class BreachedClient(RegistryClient):
    """A node's client of a registry an attacker controls: it can answer a channel read
    with an older revision (`replay`, its real signatures with it) and keep serving the
    last timestamp it had (`frozen`: it cannot sign a new one). Honest when both are None."""

    replay: Revision | None = None
    frozen: dict[str, Any] | None = None

    def get_channel(self, name: str) -> Revision:
        return self.replay if self.replay is not None else super().get_channel(name)

    def channel_timestamp(self, channel: str) -> dict[str, Any]:
        return self.frozen if self.frozen is not None else super().channel_timestamp(channel)


def make_root(keys: Path, timestamp: Path | None = None) -> TrustRoot:
    """Two of two admins; a publisher; approve:prod two of three; the registry's timestamp
    key (its public key file `timestamp`) when given."""
    public = {name: load_public_key(keys / f"{name}.pub.json") for name in KEYS}
    root = TrustRoot.create([public["admin1"], public["admin2"]], threshold=2)
    root.add_key("publish:*", public["publisher"])
    if timestamp is not None:
        root.add_key("timestamp", load_public_key(timestamp))
    for name in ("approver1", "approver2", "approver3"):
        root.add_key("approve:prod", public[name])
    root.set_threshold("approve:prod", 2)
    for name in ("admin1", "admin2"):
        root.sign(load_signer(keys / f"{name}.key"))
    return root


def databases(kind: str) -> Iterator[str | None]:
    """None (SQLite) or a scratch PostgreSQL database's URL (skips without a server)."""
    if kind == "sqlite":
        yield None
        return
    try:
        with fresh_pg_database("weact_trust") as url:
            yield url
    except PostgresUnavailable as exc:
        pytest.skip(f"PostgreSQL at 127.0.0.1:5432 unavailable: {exc}")


def world_of(
    database: str | None,
    tmp_path_factory: pytest.TempPathFactory,
    tiny_backbone: Path,
    tiny_adapters: dict[str, Path],
) -> Iterator[World]:
    keys = tmp_path_factory.mktemp("keys")
    for name in KEYS:
        create_key(keys, name)
    root_path = keys / "root.json"
    workdir = tmp_path_factory.mktemp("registry")
    with contextlib.ExitStack() as stack:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("WEACT_TIMESTAMP_EXPIRY_S", str(TIMESTAMP_EXPIRY_S))
            server = stack.enter_context(registry_in_process(workdir, database_url=database))
        # the registry made its timestamp key beside the blob directory, as `weact serve` does
        make_root(keys, workdir / ".weact" / "timestamp.pub.json").save(root_path)
        admin = RegistryClient(server.url, server.bootstrap_token("root", "admin"))
        tokens = {
            name: admin.create_token(name=name, role=role)["token"]
            for name, role in (("alice", "publisher"), ("bob", "approver"), ("carol", "approver"))
        }
        backbone = manifest_of_path(tiny_backbone).to_json()
        root = admin.register_backbone(name="tiny", manifest=backbone)["root"]
        for order, name in enumerate(ORDER):
            admin.create_capability(name=name, description=f"{name} it.", order=order)
        clients = {name: RegistryClient(server.url, token) for name, token in tokens.items()}
        w = World(
            server, keys, root_path, admin, clients["alice"], clients["bob"], clients["carol"], root
        )
        for capability, path in tiny_adapters.items():
            w.adapters[capability] = w.publish(path, capability, ("approver1", "approver2"))
        yield w
        for client in (admin, *clients.values()):
            client.close()


def followers(
    world: World, tiny_backbone: Path, tmp_path: Path
) -> Iterator[Callable[..., ChannelFollower]]:
    from runtime.engines.peft import PeftEngine

    started: list[tuple[ChannelFollower, RegistryClient]] = []

    def start(
        channel: str,
        node_id: str,
        trust: TrustRoot | None,
        client: RegistryClient | None = None,
        dest: str | None = None,
    ) -> ChannelFollower:
        client = client or world.node()
        follower = ChannelFollower(
            client,
            PeftEngine(tiny_backbone),
            channel,
            node_id,
            tmp_path / (dest or node_id),
            wait_s=1,
            retry_s=0.2,
            heartbeat_s=0.5,
            trust=trust,
        )
        started.append((follower, client))
        follower.start()
        return follower

    yield start
    for follower, client in started:
        follower.stop()
        client.close()


def eventually(
    check: Callable[[], bool], timeout: float = 20.0, state: Callable[[], str] | None = None
) -> float:
    """Seconds until `check()` held; past `timeout` the assertion says `state()`."""
    start = time.monotonic()
    while not check():
        waited = time.monotonic() - start
        assert waited < timeout, f"not met in {waited:.1f} s" + (f": {state()}" if state else "")
        time.sleep(0.05)
    return time.monotonic() - start


# A breach written to the database sends no notification: the registry's channel cache
# answers with the old head for up to its TTL (5 s) before a node hears of it, and a loaded
# CI machine has taken past 20 s for the rest.
REFUSAL_S = 60.0


def refused(world: World, follower: ChannelFollower, revision: int, served: int) -> str:
    """Wait until the node heard of `revision` and refused it; it still serves `served`."""

    def state() -> str:
        return f"head {follower.head}, serving {follower.revision}: {follower.last_error!r}"

    eventually(
        lambda: (follower.head or 0) >= revision and "not trusted" in follower.last_error,
        REFUSAL_S,
        state,
    )
    assert follower.revision == served
    assert follower.engine.audit().ok
    row = world.node_row(follower.node_id)
    eventually(
        lambda: "not trusted" in world.node_row(follower.node_id)["audit"]["detail"],
        REFUSAL_S,
        lambda: f"{state()}; the registry's row: {world.node_row(follower.node_id)['audit']}",
    )
    assert row["revision"] == served
    return follower.last_error


def attacker_adapter(tiny_backbone: Path, tmp_path: Path, seed: int) -> Path:
    return build_tiny_adapter(tiny_backbone, tmp_path / f"evil{seed}", seed=seed)


def breach(
    world: World, backbone: Path, tmp_path: Path, seed: int, channel: str = "prod"
) -> tuple[int, str, int]:
    """The attacker's adapter, approved and set as `channel`'s head by writing the database
    and blob store directly (the registry's own services, no API, no auth), with signature
    rows claiming the trusted keys' ids, signed by mallory: (its id, its manifest root, the
    revision)."""
    directory = attacker_adapter(backbone, tmp_path, seed)
    store = LocalBlobStore(world.server.store_url)
    files = {name: store.put([(directory / name).read_bytes()]) for name in ADAPTER_FILES}
    intruder = Principal(name="db-intruder", role=Role.ADMIN)
    draft = adapter_services.AdapterDraft(
        capability="write", backbone=world.backbone_root, files=files
    )
    database = Database(world.server.database_url)
    try:
        evil = adapter_services.register_adapter(
            database=database, store=store, actor=intruder, draft=draft
        )
    finally:
        database.dispose()
    with session_scope(world.server.database_url) as session:
        session.execute(
            update(SqlAdapterVersion)
            .where(SqlAdapterVersion.id == evil.id)
            .values(state="approved")
        )
        identity = AdapterIdentity(
            "write", evil.manifest_root, world.backbone_root, None, files[ADAPTER_FILES[0]]
        )
        for kind, predicate, claimed in (
            ("publish", PUBLISH, "publisher"),
            ("approve", APPROVE, "approver1"),
            ("approve", APPROVE, "approver2"),
        ):
            envelope = sign_identity(identity, predicate, world.signer("mallory"))
            keyid = load_public_key(world.keys / f"{claimed}.pub.json").keyid
            envelope["signatures"][0]["keyid"] = keyid  # a forged claim of a trusted key
            session.add(
                SqlAdapterSignature(
                    adapter_id=evil.id, kind=kind, keyid=keyid, envelope=envelope,
                    created_by="db-intruder",
                )
            )  # fmt: skip
        request = PromoteRequest(channel, None, {"write": evil.id}, None)
        revision = promote(session=session, actor=intruder, request=request).revision
    return evil.id, evil.manifest_root, revision.revision
