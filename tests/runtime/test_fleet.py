"""A fleet end to end: two registry processes on one PostgreSQL database, two runtime nodes.

The nodes (`weact runtime serve`, tiny model) long-poll registry process B; every change is
made through registry process A, so only PostgreSQL LISTEN/NOTIFY tells B's long-polls.
Episodes are driven over MCP by the official client in its default (stateless) mode.

    rev 1 {plan, search}                       promote
    rev 2 {plan, search, write@1}              promote    -> episode E opens, loads write
    rev 3 {plan, search, write@2}              promote    -> new episodes get write@2, E keeps @1
    rev 4 {plan, search}                       rollback 1 -> write unavailable to new episodes
    rev 5 {plan, search, write@2}              promote
    rev 6 {plan, search}                       revoke write@2 -> unavailable on every node
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("peft")

from support.fleet import (  # noqa: E402
    PostgresUnavailable,
    Seeded,
    fresh_pg_database,
)
from support.nodes import RuntimeNode, runtime_node  # noqa: E402

from registry.launcher import registry_processes  # noqa: E402
from storage.manifest import manifest_of_path  # noqa: E402

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # four processes: make test-slow
ORDER = ["plan", "search", "write"]


def eventually(check: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not in {timeout} s: {what}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def pg_database() -> Iterator[str]:
    try:
        with fresh_pg_database("weact_fleet") as url:
            yield url
    except PostgresUnavailable as exc:
        pytest.skip(f"PostgreSQL unavailable: {exc}")


def serving(nodes: list[RuntimeNode], revision: int) -> Callable[[], bool]:
    return lambda: all(n.health()["library"]["revision"] == revision for n in nodes)


def node_rows(world: Seeded) -> dict[str, dict]:
    return {n["id"]: dict(n) for n in world.admin.list_nodes()}


def load(node: RuntimeNode, handle: str, capability: str) -> tuple[bool, object]:
    ((error, result),) = node.calls(("load_lora", {"episode": handle, "capability": capability}))
    return error, result


def test_a_fleet_follows_promotions_rollbacks_and_revokes(
    pg_database: str, tiny_backbone: Path, tiny_adapters: dict[str, Path], tmp_path: Path
) -> None:
    from runtime.tiny import build_tiny_adapter

    write2 = build_tiny_adapter(tiny_backbone, tmp_path / "write2", seed=77)
    with registry_processes(tmp_path, 2, pg_database, str(tmp_path / "blobs")) as (a, b):
        world = Seeded.create(a, manifest_of_path(tiny_backbone).to_json(), ORDER)
        ids = {c: world.publish(p, c)["id"] for c, p in tiny_adapters.items()}
        write2_id = world.publish(write2, "write")["id"]
        rev1 = world.promote("prod", {"plan": ids["plan"], "search": ids["search"]})
        node_tokens = [
            world.admin.create_token(name=f"node-{i}", role="node")["token"] for i in (1, 2)
        ]
        with (
            runtime_node(
                tmp_path / "n1", backbone=tiny_backbone, registry_url=b.url,
                registry_token=node_tokens[0], channel="prod", node_id="n1", token="t1",
            ) as n1,
            runtime_node(
                tmp_path / "n2", backbone=tiny_backbone, registry_url=b.url,
                registry_token=node_tokens[1], channel="prod", node_id="n2", token="t2",
            ) as n2,
        ):  # fmt: skip
            nodes = [n1, n2]
            assert serving(nodes, rev1)()

            rev2 = world.promote("prod", {"write": ids["write"]})
            eventually(serving(nodes, rev2), what="rev 2 everywhere")
            old = n1.open_episode()
            assert (old["revision"], sorted(old["capabilities"])) == (rev2, ORDER)
            assert load(n1, old["episode"], "write")[0] is False

            # promote through A while the nodes long-poll B
            rev3 = world.promote("prod", {"write": write2_id})
            eventually(serving(nodes, rev3), timeout=10, what="rev 3 everywhere")
            for node in nodes:
                fresh = node.open_episode()
                assert fresh["revision"] == rev3
                assert load(node, fresh["episode"], "write") == (
                    False,
                    {"episode_id": fresh["episode_id"], "ok": True, "active": "write"},
                )
                node.calls(("close_episode", {"episode": fresh["episode"]}))
            # the episode opened before the promotion finishes on its revision
            steps = n1.calls(
                ("offload_lora", {"episode": old["episode"]}),
                ("load_lora", {"episode": old["episode"], "capability": "write"}),
                ("offload_lora", {"episode": old["episode"]}),
            )
            assert [error for error, _ in steps] == [False, False, False]
            assert n1.episode(old["episode_id"])["revision"] == rev2
            eventually(
                lambda: "write@1" in node_rows(world)["n1"]["audit"]["adapters"],
                what="n1's audit names write@1, resident for the open episode",
            )

            # rollback to a revision with fewer capabilities
            rev4 = world.rollback("prod", rev1)
            eventually(serving(nodes, rev4), what="rollback everywhere")
            for node in nodes:
                fresh = node.open_episode()
                assert sorted(fresh["capabilities"]) == ["plan", "search"]
                error, text = load(node, fresh["episode"], "write")
                assert error
                assert "'write' is unavailable" in str(text)
                assert "available: plan, search" in str(text)
                node.calls(("close_episode", {"episode": fresh["episode"]}))
            assert load(n1, old["episode"], "write")[0] is False  # still on its revision
            n1.calls(("close_episode", {"episode": old["episode"]}))

            # revoke the adapter a channel serves
            rev5 = world.promote("prod", {"write": write2_id})
            eventually(serving(nodes, rev5), what="rev 5 everywhere")
            world.revoke(write2_id)
            rev6 = world.head("prod")
            assert rev6 == rev5 + 1
            eventually(serving(nodes, rev6), what="revoke everywhere")
            for node in nodes:
                fresh = node.open_episode()
                error, text = load(node, fresh["episode"], "write")
                assert error
                assert "'write' is unavailable" in str(text)
                health = node.health()
                assert health["status"] == "ok"
                assert health["library"]["revision"] == rev6
                assert health["adapters"] == ["plan", "search"]
                node.calls(("close_episode", {"episode": fresh["episode"]}))

            digest = world.admin.get_channel("prod")["library_digest"]

            def reported() -> bool:
                rows = node_rows(world)
                return all(
                    rows[n.node_id]["revision"] == rev6
                    and rows[n.node_id]["audit_ok"]
                    and rows[n.node_id]["library_digest"] == digest
                    and rows[n.node_id]["lag"] == 0
                    and not rows[n.node_id]["stale"]
                    and set(rows[n.node_id]["audit"]["adapters"]) == {"plan", "search"}
                    for n in nodes
                )

            eventually(reported, what=f"heartbeats of revision 6, clean: {node_rows(world)}")
            assert {row["heartbeat_s"] for row in node_rows(world).values()} == {0.5}
            for node in nodes:  # dozens of heartbeats by now, and not a line each
                assert "httpx" not in node.log.read_text()
        world.close()
