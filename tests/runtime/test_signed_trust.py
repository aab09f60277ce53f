"""Signed trust end to end: a node with `--root` serves only what the offline root's keys
signed, whatever the registry says (issue 28).

A real `weact serve` (SQLite and PostgreSQL), real signatures (registry.trust), a real
PeftEngine following the channel over HTTP. The attacks:

- an insider with only the admin token mints a publisher and an approver, pushes an
  attacker adapter, signs and approves it with keys of their own and promotes it: a node
  without a root serves it within seconds (measured), a node with the root refuses it;
- the database and blob store written directly (the registry's own services run on them,
  no API, no auth): an attacker adapter marked approved with correct digests, signature
  rows that claim the approvers' key ids, set as the channel head: refused;
- one stolen publisher key, or one approver key against a threshold of two: refused;
- the root rotated to drop an approver key: its signatures stop counting.

The node keeps serving the last verified library and says why in its heartbeat.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("peft")

from sqlalchemy import update  # noqa: E402
from support.signed_world import (  # noqa: E402
    DATABASES,
    ORDER,
    World,
    attacker_adapter,
    databases,
    eventually,
    followers,
    refused,
    world_of,
)

from registry.client import RegistryClient  # noqa: E402
from registry.db.models import SqlAdapterSignature, SqlAdapterVersion  # noqa: E402
from registry.db.session import Database, session_scope  # noqa: E402
from registry.domain import Principal, Role  # noqa: E402
from registry.services import adapters as adapter_services  # noqa: E402
from registry.services.channels import PromoteRequest, promote  # noqa: E402
from registry.trust import APPROVE, PUBLISH, TrustRoot, sign_identity  # noqa: E402
from registry.trust.statements import AdapterIdentity  # noqa: E402
from storage.local import LocalBlobStore  # noqa: E402

logger = logging.getLogger(__name__)


@pytest.fixture(scope="module", params=DATABASES)
def database(request: pytest.FixtureRequest) -> Iterator[str | None]:
    yield from databases(request.param)


@pytest.fixture(scope="module")
def world(
    database: str | None,
    tmp_path_factory: pytest.TempPathFactory,
    tiny_backbone: Path,
    tiny_adapters: dict[str, Path],
) -> Iterator[World]:
    yield from world_of(database, tmp_path_factory, tiny_backbone, tiny_adapters)


@pytest.fixture
def follow(world: World, tiny_backbone: Path, tmp_path: Path) -> Iterator[Any]:
    yield from followers(world, tiny_backbone, tmp_path)


def test_a_node_with_the_root_serves_a_revision_its_keys_signed(world: World, follow) -> None:
    first = world.promote("prod", world.adapters)
    follower = follow("prod", "node-good", TrustRoot.load(world.root_path))
    assert follower.revision == first
    assert sorted(follower.engine.adapters) == ORDER
    assert follower.last_error == ""


def test_an_insider_with_the_admin_token_cannot_get_weights_served(
    world: World, follow, tiny_backbone: Path, tmp_path: Path
) -> None:
    channel = "prod"
    served = world.promote(channel, world.adapters)
    trusted = follow(channel, "node-trust", TrustRoot.load(world.root_path))
    today = follow(channel, "node-today", None)  # no root: trusts the registry

    # the insider: only the admin token; new principals, keys of their own
    minted = {
        role: world.admin.create_token(name=f"mallory-{role}", role=role)["token"]
        for role in ("publisher", "approver")
    }
    with (
        RegistryClient(world.server.url, minted["publisher"]) as pub,
        RegistryClient(world.server.url, minted["approver"]) as app,
    ):
        evil = pub.push_adapter(
            attacker_adapter(tiny_backbone, tmp_path, 66),
            capability="write",
            backbone=world.backbone_root,
            signer=world.signer("mallory"),
        )
        app.sign_approval(evil["id"], world.signer("mallory"))
        app.approve(evil["id"])
        started = time.monotonic()
        attack = int(
            app.promote(channel, {"write": evil["id"]}, backbone=world.backbone_root)["revision"][
                "revision"
            ]
        )
    seconds = eventually(lambda: today.revision == attack)
    logger.warning("without a root, a node served the insider's adapter in %.2f s", seconds)
    assert today.engine.adapters["write"].manifest_root == evil["manifest_root"]

    reason = refused(world, trusted, attack, served)
    assert "0 of 1 publish signature(s)" in reason, reason
    assert trusted.engine.adapters["write"].manifest_root != evil["manifest_root"]
    logger.warning("with the root, refused in %.2f s: %s", time.monotonic() - started, reason)


def test_a_compromised_database_cannot_get_weights_served(
    world: World, follow, tiny_backbone: Path, tmp_path: Path
) -> None:
    """The database and blob store written directly: the registry's services run on them
    without the API; the attacker's rows say approved, with correct digests, and carry
    signature rows claiming the trusted keys' ids (signed by the attacker's key)."""
    channel = "prod"
    served = world.promote(channel, world.adapters)
    trusted = follow(channel, "node-db", TrustRoot.load(world.root_path))

    directory = attacker_adapter(tiny_backbone, tmp_path, 77)
    store = LocalBlobStore(world.server.store_url)
    names = ("adapter_config.json", "adapter_model.safetensors")
    files = {name: store.put([(directory / name).read_bytes()]) for name in names}
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
            "write", evil.manifest_root, world.backbone_root, None, files["adapter_config.json"]
        )
        mallory = world.signer("mallory")
        for kind, predicate, claimed in (
            ("publish", PUBLISH, "publisher"),
            ("approve", APPROVE, "approver1"),
            ("approve", APPROVE, "approver2"),
        ):
            envelope = sign_identity(identity, predicate, mallory)
            keyid = world.public(claimed).keyid
            envelope["signatures"][0]["keyid"] = keyid  # a forged claim of a trusted key
            session.add(
                SqlAdapterSignature(
                    adapter_id=evil.id,
                    kind=kind,
                    keyid=keyid,
                    envelope=envelope,
                    created_by="db-intruder",
                )
            )
        request = PromoteRequest(channel, None, {"write": evil.id}, None)
        attack = promote(session=session, actor=intruder, request=request).revision.revision

    reason = refused(world, trusted, attack, served)
    assert "0 of 1 publish signature(s)" in reason, reason


def test_one_stolen_key_is_not_enough(
    world: World, follow, tiny_backbone: Path, tmp_path: Path
) -> None:
    """The publisher's key signs, and one approver's key (of a threshold of two)."""
    channel = "prod"
    served = world.promote(channel, world.adapters)
    trusted = follow(channel, "node-onekey", TrustRoot.load(world.root_path))
    evil = world.publish(attacker_adapter(tiny_backbone, tmp_path, 88), "write", ("approver3",))
    attack = world.promote(channel, {"write": evil})
    reason = refused(world, trusted, attack, served)
    assert "1 of 2 approve signature(s) required by root role approve:prod" in reason, reason


def test_a_rotated_root_stops_counting_a_revoked_approver_key(
    world: World, follow, tiny_backbone: Path, tmp_path: Path
) -> None:
    channel = "prod"
    old = TrustRoot.load(world.root_path)
    adapter = world.publish(
        attacker_adapter(tiny_backbone, tmp_path, 91), "write", ("approver1", "approver3")
    )
    revision = world.promote(channel, {**world.adapters, "write": adapter})
    assert follow(channel, "node-old-root", old).revision == revision

    rotated = TrustRoot.load(world.root_path)  # approver3's key is compromised: revoke it
    rotated.revoke_key("approve:prod", world.public("approver3").keyid)
    for name in ("admin1", "admin2"):
        rotated.sign(world.signer(name))
    rotated.verify(old)  # the old admin threshold signed the new version
    assert rotated.version == old.version + 1

    with pytest.raises(Exception, match="not trusted.*1 of 2 approve"):
        follow(channel, "node-new-root", rotated)
