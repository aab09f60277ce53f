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
from pathlib import Path

import pytest

pytest.importorskip("peft")

from support.signed_world import (  # noqa: E402
    ORDER,
    World,
    attacker_adapter,
    breach,
    eventually,
    refused,
)

from registry.client import RegistryClient  # noqa: E402
from registry.trust import TrustRoot  # noqa: E402

logger = logging.getLogger(__name__)


def test_a_node_with_the_root_serves_a_revision_its_keys_signed(
    signed_world: World, signed_follow
) -> None:
    first = signed_world.promote("prod", signed_world.adapters)
    follower = signed_follow("prod", "node-good", TrustRoot.load(signed_world.root_path))
    assert follower.revision == first
    assert sorted(follower.engine.adapters) == ORDER
    assert follower.last_error == ""


def test_an_insider_with_the_admin_token_cannot_get_weights_served(
    signed_world: World, signed_follow, tiny_backbone: Path, tmp_path: Path
) -> None:
    channel = "prod"
    served = signed_world.promote(channel, signed_world.adapters)
    trusted = signed_follow(channel, "node-trust", TrustRoot.load(signed_world.root_path))
    today = signed_follow(channel, "node-today", None)  # no root: trusts the registry

    # the insider: only the admin token; new principals, keys of their own
    minted = {
        role: signed_world.admin.create_token(name=f"mallory-{role}", role=role)["token"]
        for role in ("publisher", "approver")
    }
    with (
        RegistryClient(signed_world.server.url, minted["publisher"]) as pub,
        RegistryClient(signed_world.server.url, minted["approver"]) as app,
    ):
        evil = pub.push_adapter(
            attacker_adapter(tiny_backbone, tmp_path, 66),
            capability="write",
            backbone=signed_world.backbone_root,
            signer=signed_world.signer("mallory"),
        )
        app.sign_approval(evil["id"], signed_world.signer("mallory"))
        app.approve(evil["id"])
        started = time.monotonic()
        attack = int(
            app.promote(channel, {"write": evil["id"]}, backbone=signed_world.backbone_root)[
                "revision"
            ]["revision"]
        )
    seconds = eventually(lambda: today.revision == attack)
    logger.warning("without a root, a node served the insider's adapter in %.2f s", seconds)
    assert today.engine.adapters["write"].manifest_root == evil["manifest_root"]

    reason = refused(signed_world, trusted, attack, served)
    assert "0 of 1 publish signature(s)" in reason, reason
    assert trusted.engine.adapters["write"].manifest_root != evil["manifest_root"]
    logger.warning("with the root, refused in %.2f s: %s", time.monotonic() - started, reason)


def test_a_compromised_database_cannot_get_weights_served(
    signed_world: World, signed_follow, tiny_backbone: Path, tmp_path: Path
) -> None:
    """The database and blob store written directly: the registry's services run on them
    without the API; the attacker's rows say approved, with correct digests, and carry
    signature rows claiming the trusted keys' ids (signed by the attacker's key)."""
    channel = "prod"
    served = signed_world.promote(channel, signed_world.adapters)
    trusted = signed_follow(channel, "node-db", TrustRoot.load(signed_world.root_path))

    _, _, attack = breach(signed_world, tiny_backbone, tmp_path, 77, channel)

    reason = refused(signed_world, trusted, attack, served)
    assert "0 of 1 publish signature(s)" in reason, reason


def test_one_stolen_key_is_not_enough(
    signed_world: World, signed_follow, tiny_backbone: Path, tmp_path: Path
) -> None:
    """The publisher's key signs, and one approver's key (of a threshold of two)."""
    channel = "prod"
    served = signed_world.promote(channel, signed_world.adapters)
    trusted = signed_follow(channel, "node-onekey", TrustRoot.load(signed_world.root_path))
    evil = signed_world.publish(
        attacker_adapter(tiny_backbone, tmp_path, 88), "write", ("approver3",)
    )
    attack = signed_world.promote(channel, {"write": evil})
    reason = refused(signed_world, trusted, attack, served)
    assert "1 of 2 approve signature(s) required by root role approve:prod" in reason, reason


def test_a_rotated_root_stops_counting_a_revoked_approver_key(
    signed_world: World, signed_follow, tiny_backbone: Path, tmp_path: Path
) -> None:
    channel = "prod"
    old = TrustRoot.load(signed_world.root_path)
    adapter = signed_world.publish(
        attacker_adapter(tiny_backbone, tmp_path, 91), "write", ("approver1", "approver3")
    )
    revision = signed_world.promote(channel, {**signed_world.adapters, "write": adapter})
    assert signed_follow(channel, "node-old-root", old).revision == revision

    rotated = TrustRoot.load(signed_world.root_path)  # approver3's key is compromised: revoke it
    rotated.revoke_key("approve:prod", signed_world.public("approver3").keyid)
    for name in ("admin1", "admin2"):
        rotated.sign(signed_world.signer(name))
    rotated.verify(old)  # the old admin threshold signed the new version
    assert rotated.version == old.version + 1

    with pytest.raises(Exception, match="not trusted.*1 of 2 approve"):
        signed_follow(channel, "node-new-root", rotated)
