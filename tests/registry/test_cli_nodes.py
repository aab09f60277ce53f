"""`weact nodes` through the real console script against the registry over real HTTP (served
from a thread of the test process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from factories import backbone_manifest_json, write_adapter, write_backbone
from support.fleet import Seeded
from support.serving import InProcessRegistry, registry_in_process

from registry.client import RegistryClient

WEACT = Path(sys.executable).with_name("weact")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcessRegistry, Seeded]]:
    tmp = tmp_path_factory.mktemp("nodes")
    with registry_in_process(tmp) as server:
        world = Seeded.create(server, backbone_manifest_json(write_backbone(tmp / "bb")), ["write"])
        first = world.publish(write_adapter(tmp / "w1", seed=1), "write")
        second = world.publish(write_adapter(tmp / "w2", seed=2), "write")
        world.promote("prod", {"write": first["id"]})
        world.promote("prod", {"write": second["id"]})
        world.promote("canary", {"write": second["id"]})
        digest = world.admin.get_channel("prod")["library_digest"]
        audit = {"ok": True, "backbone_root": world.backbone_root, "adapters": {}}
        beats = {
            "gpu-a": dict(channel="prod", revision=2, audit=audit,
                          status={"library_digest": digest, "stale": False, "lag": 0}),
            "gpu-b": dict(channel="prod", revision=1, audit={**audit, "ok": False},
                          status={"stale": True, "lag": 1}),
            "gpu-c": dict(channel="canary", revision=1, audit=audit),
        }  # fmt: skip
        for node_id, beat in beats.items():  # a node token reports as its own node only
            token = world.admin.create_token(name=node_id, role="node", node_id=node_id)
            with RegistryClient(server.url, token["token"]) as node:
                node.heartbeat(node_id, **beat)  # type: ignore[arg-type]
        yield server, world
        world.close()


def weact(server: InProcessRegistry, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WEACT_URL": server.url, "WEACT_TOKEN": token, "COLUMNS": "200"}
    return subprocess.run(
        [str(WEACT), *args], env=env, capture_output=True, text=True, timeout=60, check=True
    )


def test_nodes_json(fleet) -> None:
    server, world = fleet
    nodes = json.loads(weact(server, world.tokens["reader"], "nodes", "--json").stdout)
    view = {n["id"]: (n["channel"], n["revision"], n["head"], n["lag"], n["stale"]) for n in nodes}
    assert view == {
        "gpu-a": ("prod", 2, 2, 0, False),
        "gpu-b": ("prod", 1, 2, 1, True),
        "gpu-c": ("canary", 1, 1, 0, False),
    }
    by_id = {n["id"]: n for n in nodes}
    assert by_id["gpu-a"]["library_digest"] == world.admin.get_channel("prod")["library_digest"]
    assert by_id["gpu-b"]["audit_ok"] is False
    assert all(n["heartbeat_age_s"] >= 0 for n in nodes)


def test_nodes_table_and_channel_filter(fleet) -> None:
    server, world = fleet
    table = weact(server, world.tokens["reader"], "nodes", "--channel", "prod").stdout
    assert "2 node(s)" in table
    rows = {line.split()[0]: line for line in table.splitlines() if "gpu-" in line}
    assert set(rows) == {"gpu-a", "gpu-b"}
    assert "FAILED" in rows["gpu-b"]
    assert "stale" in rows["gpu-b"]
    assert "FAILED" not in rows["gpu-a"]


def test_the_nodes_table_fits_100_columns_and_never_folds_a_digest() -> None:
    from rich.console import Console

    from registry.cli.nodes import render_nodes

    digest = "0123456789abcdef" * 4
    node = {"id": "gpu-node-eu-west-1ab", "channel": "prod", "revision": 12, "head": 13,
            "lag": 1, "audit_ok": False, "heartbeat_age_s": 95.2, "stale": True,
            "library_digest": digest}  # fmt: skip
    console = Console(width=100, record=True)
    console.print(render_nodes([node]))
    lines = [line.rstrip() for line in console.export_text().splitlines()]
    (row,) = [line for line in lines if "gpu-node-eu-west-1ab " in line]
    assert max(map(len, lines)) <= 100
    for word in ("prod", "FAILED", "95 s", "stale", digest[:12] + "…"):
        assert word in row
    assert all(digest[12:24] not in line for line in lines)  # no folded second half
    header = next(line for line in lines if line.split()[:1] == ["node"])
    assert header.split() == ["node", "channel", "rev", "head", "lag", "audit", "beat", "stale",
                              "library"]  # fmt: skip
