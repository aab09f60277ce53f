"""Signed channel revisions and timestamps end to end (issue 28): what a node with `--root`
refuses even when every adapter signature in it is valid.

A real `weact serve` (SQLite and PostgreSQL) holding a timestamp key named in the root,
approvers signing revisions through the client, a PeftEngine following the channel. The
registry is breached (`BreachedClient`): it replays an older, properly signed revision, or
stops renewing its timestamp (a freeze).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("peft")

from support.signed_world import (  # noqa: E402
    TIMESTAMP_EXPIRY_S,
    World,
    attacker_adapter,
    eventually,
    refused,
)

from registry.errors import UntrustedError  # noqa: E402
from registry.trust import TrustRoot  # noqa: E402
from runtime.trusted import STATE_FILE  # noqa: E402

WEACT = Path(sys.executable).with_name("weact")


def test_a_replayed_older_revision_with_a_revoked_adapter_is_refused(
    signed_world: World, signed_follow, tiny_backbone: Path, tmp_path: Path
) -> None:
    channel, root = "prod", TrustRoot.load(signed_world.root_path)
    leaked = signed_world.publish(
        attacker_adapter(tiny_backbone, tmp_path, 31), "write", ("approver1", "approver2")
    )
    old = signed_world.promote(channel, {**signed_world.adapters, "write": leaked})
    client = signed_world.breached_node()
    node = signed_follow(channel, "node-replay", root, client=client)
    assert node.revision == old
    new = signed_world.promote(
        channel, signed_world.adapters
    )  # the leaked adapter leaves the channel
    signed_world.bob.revoke(leaked, "weights leaked")
    eventually(lambda: node.revision == new)

    client.replay = signed_world.admin.channel_revision(channel, old)  # signatures all still valid
    assert not node.sync()
    assert "older than revision" in node.last_error, node.last_error
    assert node.revision == new
    assert (
        node.engine.adapters["write"].manifest_root
        != client.replay["library"]["write"]["manifest_root"]
    )
    node.stop()

    # a restart remembers the highest revision verified (the node's state directory)
    assert (
        json.loads((tmp_path / "node-replay" / STATE_FILE).read_text())["channels"][channel][
            "revision"
        ]
        == new
    )
    with pytest.raises(UntrustedError, match="older than revision"):
        signed_follow(channel, "node-replay-again", root, client=client, dest="node-replay")


def test_a_frozen_registry_makes_the_node_stale(
    signed_world: World, signed_follow, tmp_path: Path
) -> None:
    channel = "prod"
    signed_world.promote(channel, signed_world.adapters)
    client = signed_world.breached_node()
    node = signed_follow(
        channel, "node-frozen", TrustRoot.load(signed_world.root_path), client=client
    )
    assert not node.status().stale

    client.frozen = client.channel_timestamp(channel)  # no new timestamp from now on
    eventually(lambda: node.status().stale, timeout=TIMESTAMP_EXPIRY_S + 10)
    assert "expired" in node.status().detail, node.status().detail
    eventually(lambda: signed_world.node_row("node-frozen")["stale"])
    assert "expired" in signed_world.node_row("node-frozen")["audit"]["detail"]
    listed = _weact_nodes(signed_world, tmp_path)
    (line,) = [row for row in listed.splitlines() if "node-frozen" in row]
    assert "stale" in line, listed

    client.frozen = None  # the registry signs again
    eventually(lambda: not node.status().stale, timeout=10)


def test_one_approver_key_cannot_make_a_revision_count(
    signed_world: World, signed_follow, tiny_backbone: Path, tmp_path: Path
) -> None:
    channel = "prod"
    served = signed_world.promote(channel, signed_world.adapters)
    node = signed_follow(channel, "node-one-key", TrustRoot.load(signed_world.root_path))
    adapter = signed_world.publish(
        attacker_adapter(tiny_backbone, tmp_path, 41), "write", ("approver1", "approver2")
    )
    attack = signed_world.promote(channel, {"write": adapter}, signers=("approver3",))
    refused(signed_world, node, attack, served)
    # heard before its one signature was stored ("0 of 2"), it is checked again when retried
    eventually(lambda: "1 of 2 approver signature(s) of the revision" in node.last_error)
    assert node.revision == served

    # revoking needs no second person: a revision that only removes adapters counts with one
    removal = signed_world.promote(
        channel, {**signed_world.adapters, "search": None}, signers=("approver1",)
    )
    eventually(lambda: node.revision == removal)
    assert "search" not in node.engine.adapters


def test_after_rotation_the_old_keys_revision_signatures_stop_counting(
    signed_world: World, signed_follow, tiny_backbone: Path, tmp_path: Path
) -> None:
    channel = "prod"
    old = TrustRoot.load(signed_world.root_path)
    adapter = signed_world.publish(
        attacker_adapter(tiny_backbone, tmp_path, 51), "write", ("approver1", "approver2")
    )
    revision = signed_world.promote(
        channel, {**signed_world.adapters, "write": adapter}, signers=("approver1", "approver3")
    )
    assert signed_follow(channel, "node-before", old).revision == revision

    rotated = TrustRoot.load(signed_world.root_path)  # approver3's key is compromised: revoke it
    rotated.revoke_key("approve:prod", signed_world.public("approver3").keyid)
    for name in ("admin1", "admin2"):
        rotated.sign(signed_world.signer(name))
    rotated.verify(old)
    with pytest.raises(UntrustedError, match="1 of 2 approver signature.* of the revision"):
        signed_follow(channel, "node-after", rotated)


def _weact_nodes(signed_world: World, cwd: Path) -> str:
    token = signed_world.admin.create_token(name="viewer", role="reader")["token"]
    env = {
        **os.environ,
        "WEACT_URL": signed_world.server.url,
        "WEACT_TOKEN": token,
        "COLUMNS": "200",
    }
    done = subprocess.run(
        [str(WEACT), "nodes"], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
