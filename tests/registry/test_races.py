"""Races through real HTTP against a real `weact serve` on PostgreSQL.

Sixteen threads released together by a barrier hit one server process (uvicorn, its
thread pool, a pool of PostgreSQL connections): exactly one of racing transitions wins,
the others get 409, nothing answers 5xx, the winner writes exactly one event, the audit
chain verifies and fsck finds nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from factories import backbone_manifest_json, write_backbone
from harness import Harness, World, empty_database, make_world
from live import THREADS, assert_consistent, at_once, events_about, live_harness, statuses

from registry.launcher import EmbeddedRegistry, embedded_registry

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def pg_server(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRegistry]:
    workdir = tmp_path_factory.mktemp("race-server")
    with embedded_registry(workdir, pg_url, str(workdir / "blobs")) as server:
        yield server


@pytest.fixture
def live(pg_server: EmbeddedRegistry, pg_url: str, tmp_path: Path) -> Iterator[Harness]:
    empty_database(pg_url)
    with live_harness(pg_server, tmp_path) as api:
        yield api


@pytest.fixture
def live_world(live: Harness) -> World:
    return make_world(live)


def _error_codes(responses: list[Any]) -> Counter[str]:
    return Counter(r.json()["error"] for r in responses if r.status_code >= 400)


def test_approve_races_reject_one_decision_wins(live_world: World) -> None:
    api = live_world.api
    adapter = live_world.adapter()
    verbs = ["approve", "reject"] * (THREADS // 2)

    results = at_once(
        lambda i: api.request("POST", f"/adapters/{adapter['id']}/{verbs[i]}", "approver", json={})
    )

    codes = statuses(results)
    assert sorted(codes) == [200] + [409] * (THREADS - 1), codes
    assert _error_codes(results) == {"invalid_state": THREADS - 1}
    winner = verbs[codes.index(200)]
    state = api.ok("GET", f"/adapters/{adapter['id']}", "reader")["state"]
    assert state == {"approve": "approved", "reject": "rejected"}[winner]
    assert events_about(api, f"adapter:{adapter['id']}") == [
        "adapter.register",
        f"adapter.{winner}",
    ]
    assert_consistent(api)


def test_concurrent_revokes_one_wins_and_the_head_moves_once(live_world: World) -> None:
    api = live_world.api
    write = live_world.approved("write", seed=1)
    plan = live_world.approved("plan", seed=2)
    live_world.promote({"write": write["id"], "plan": plan["id"]})

    results = at_once(
        lambda i: api.request("POST", f"/adapters/{write['id']}/revoke", "approver", json={})
    )

    codes = statuses(results)
    assert sorted(codes) == [200] + [409] * (THREADS - 1), codes
    assert _error_codes(results) == {"invalid_state": THREADS - 1}
    assert events_about(api, f"adapter:{write['id']}").count("adapter.revoke") == 1
    head = api.ok("GET", "/channels/prod", "reader")
    assert (head["revision"], set(head["library"])) == (2, {"plan"})
    assert events_about(api, "channel:prod") == ["channel.promote", "channel.revoke"]
    assert_consistent(api)


@pytest.mark.parametrize("trial", range(3))
def test_promote_racing_revoke_never_leaves_a_revoked_adapter_served(
    live_world: World, trial: int
) -> None:
    """One thread revokes `write`; the others promote it, each into its own channel, or
    promote another adapter into `prod`, whose head holds `write`."""
    api = live_world.api
    write = live_world.approved("write", seed=1)
    others = [live_world.approved("search", seed=10 + i) for i in range(THREADS // 2)]
    live_world.promote({"write": write["id"]})

    def work(i: int) -> Any:
        if i == trial:
            return api.request("POST", f"/adapters/{write['id']}/revoke", "approver", json={})
        if i % 2:
            body = {"adapters": {"write": write["id"]}, "backbone": live_world.backbone}
            body["create"] = True
            return api.request("POST", f"/channels/c{i}/promote", "approver", json=body)
        body = {"adapters": {"search": others[i // 2]["id"]}}
        return api.request("POST", "/channels/prod/promote", "approver", json=body)

    results = at_once(work)

    codes = statuses(results)
    assert codes[trial] == 200, results[trial].text
    assert all(c in (201, 409) for i, c in enumerate(codes) if i != trial), codes
    assert set(_error_codes(results)) <= {"invalid_state"}
    for head in api.ok("GET", "/channels", "reader"):
        assert all(e["adapter_id"] != write["id"] for e in head["library"].values()), head
    prod_promotes = [c for i, c in enumerate(codes) if i != trial and i % 2 == 0]
    assert prod_promotes == [201] * len(prod_promotes)  # a stale head is re-read, not lost
    assert_consistent(api)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/capabilities", {"name": "code", "description": "write code", "order": None}),
        (
            "/benchmarks",
            {
                "name": "b",
                "version": 1,
                "dataset_digest": "0" * 64,
                "scope": "library",
                "metric": "acc",
                "direction": "higher",
                "tolerance": 0.01,
            },
        ),
        ("/backbones", None),
    ],
)
def test_duplicate_creations_one_201_the_rest_409(
    live_world: World, path: str, body: dict[str, Any] | None
) -> None:
    api = live_world.api
    if body is None:  # a second backbone, created sixteen times at once
        manifest = backbone_manifest_json(write_backbone(api.tmp / "other", seed=7))
        body = {"name": "other", "manifest": manifest}
    before = len(api.ok("GET", "/events?limit=1000", "reader"))

    results = at_once(lambda i: api.request("POST", path, "admin", json=body))

    codes = statuses(results)
    assert sorted(codes) == [201] + [409] * (THREADS - 1), codes
    assert _error_codes(results) == {"conflict": THREADS - 1}
    assert len(api.ok("GET", "/events?limit=1000", "reader")) == before + 1
    assert_consistent(api)


def test_first_heartbeats_of_one_node_all_succeed_with_one_row_and_one_event(
    live_world: World,
) -> None:
    api = live_world.api
    audit = {"ok": True, "backbone_root": live_world.backbone, "adapters": {}}
    beat = {"channel": "prod", "revision": None, "audit": audit}

    results = at_once(lambda i: api.request("POST", "/nodes/gpu-7/heartbeat", "node", json=beat))

    assert statuses(results) == [200] * THREADS
    assert [n["id"] for n in api.ok("GET", "/nodes", "reader")] == ["gpu-7"]
    assert events_about(api, "node:gpu-7") == ["node.report"]
    assert_consistent(api)


def test_one_unbound_node_token_racing_for_many_node_ids_binds_to_one(
    live_world: World,
) -> None:
    api = live_world.api
    beat = {"channel": "prod", "revision": None, "audit": {"ok": True}}

    results = at_once(lambda i: api.request("POST", f"/nodes/n{i}/heartbeat", "node", json=beat))

    codes = statuses(results)
    assert sorted(codes) == [200] + [403] * (THREADS - 1), codes
    assert len(api.ok("GET", "/nodes", "reader")) == 1
    assert_consistent(api)
