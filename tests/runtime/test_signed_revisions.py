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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("peft")

from support.signed_world import (  # noqa: E402
    DATABASES,
    TIMESTAMP_EXPIRY_S,
    World,
    attacker_adapter,
    databases,
    eventually,
    followers,
    refused,
    world_of,
)

from registry.errors import UntrustedError  # noqa: E402
from registry.trust import TrustRoot  # noqa: E402
from runtime.trusted import STATE_FILE  # noqa: E402

WEACT = Path(sys.executable).with_name("weact")


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


def test_a_replayed_older_revision_with_a_revoked_adapter_is_refused(
    world: World, follow, tiny_backbone: Path, tmp_path: Path
) -> None:
    channel, root = "prod", TrustRoot.load(world.root_path)
    leaked = world.publish(
        attacker_adapter(tiny_backbone, tmp_path, 31), "write", ("approver1", "approver2")
    )
    old = world.promote(channel, {**world.adapters, "write": leaked})
    client = world.breached_node()
    node = follow(channel, "node-replay", root, client=client)
    assert node.revision == old
    new = world.promote(channel, world.adapters)  # the leaked adapter leaves the channel
    world.bob.revoke(leaked, "weights leaked")
    eventually(lambda: node.revision == new)

    client.replay = world.admin.channel_revision(channel, old)  # signatures all still valid
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
        follow(channel, "node-replay-again", root, client=client, dest="node-replay")


def test_a_frozen_registry_makes_the_node_stale(world: World, follow, tmp_path: Path) -> None:
    channel = "prod"
    world.promote(channel, world.adapters)
    client = world.breached_node()
    node = follow(channel, "node-frozen", TrustRoot.load(world.root_path), client=client)
    assert not node.status().stale

    client.frozen = client.channel_timestamp(channel)  # no new timestamp from now on
    eventually(lambda: node.status().stale, timeout=TIMESTAMP_EXPIRY_S + 10)
    assert "expired" in node.status().detail, node.status().detail
    eventually(lambda: _row(world, "node-frozen")["stale"])
    assert "expired" in _row(world, "node-frozen")["audit"]["detail"]
    listed = _weact_nodes(world, tmp_path)
    (line,) = [row for row in listed.splitlines() if "node-frozen" in row]
    assert "stale" in line, listed

    client.frozen = None  # the registry signs again
    eventually(lambda: not node.status().stale, timeout=10)


def test_one_approver_key_cannot_make_a_revision_count(
    world: World, follow, tiny_backbone: Path, tmp_path: Path
) -> None:
    channel = "prod"
    served = world.promote(channel, world.adapters)
    node = follow(channel, "node-one-key", TrustRoot.load(world.root_path))
    adapter = world.publish(
        attacker_adapter(tiny_backbone, tmp_path, 41), "write", ("approver1", "approver2")
    )
    attack = world.promote(channel, {"write": adapter}, signers=("approver3",))
    refused(world, node, attack, served)
    # heard before its one signature was stored ("0 of 2"), it is checked again when retried
    eventually(lambda: "1 of 2 approver signature(s) of the revision" in node.last_error)
    assert node.revision == served

    # revoking needs no second person: a revision that only removes adapters counts with one
    removal = world.promote(channel, {**world.adapters, "search": None}, signers=("approver1",))
    eventually(lambda: node.revision == removal)
    assert "search" not in node.engine.adapters


def test_after_rotation_the_old_keys_revision_signatures_stop_counting(
    world: World, follow, tiny_backbone: Path, tmp_path: Path
) -> None:
    channel = "prod"
    old = TrustRoot.load(world.root_path)
    adapter = world.publish(
        attacker_adapter(tiny_backbone, tmp_path, 51), "write", ("approver1", "approver2")
    )
    revision = world.promote(
        channel, {**world.adapters, "write": adapter}, signers=("approver1", "approver3")
    )
    assert follow(channel, "node-before", old).revision == revision

    rotated = TrustRoot.load(world.root_path)  # approver3's key is compromised: revoke it
    rotated.revoke_key("approve:prod", world.public("approver3").keyid)
    for name in ("admin1", "admin2"):
        rotated.sign(world.signer(name))
    rotated.verify(old)
    with pytest.raises(UntrustedError, match="1 of 2 approver signature.* of the revision"):
        follow(channel, "node-after", rotated)


def _row(world: World, node_id: str) -> dict[str, Any]:
    return {n["id"]: n for n in world.admin.list_nodes()}[node_id]


def _weact_nodes(world: World, cwd: Path) -> str:
    token = world.admin.create_token(name="viewer", role="reader")["token"]
    env = {**os.environ, "WEACT_URL": world.server.url, "WEACT_TOKEN": token, "COLUMNS": "200"}
    done = subprocess.run(
        [str(WEACT), "nodes"], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
