"""Identities that cannot be doubled (issue 25): node ids are owned by one token, principal
names have one spelling, the last admin token stays, and only the publisher's principal,
approvers and admins change an adapter's tags. On SQLite and PostgreSQL, over the API."""

from __future__ import annotations

from typing import Any

import pytest
from harness import Harness, World

BEAT = {"channel": "prod", "revision": None, "audit": {"ok": True}}


def _token(api: Harness, name: str, role: str, **extra: Any) -> dict[str, Any]:
    return dict(api.ok("POST", "/tokens", json={"name": name, "role": role, **extra}))


def _as(api: Harness, secret: str) -> Harness:
    other = Harness(api.client, api.db, api.store, api.tmp, dict(api.tokens))
    other.tokens["x"] = secret
    return other


# -- node ids ------------------------------------------------------------------------------


def test_a_node_id_belongs_to_the_first_token_that_claims_it(api: Harness) -> None:
    api.ok("POST", "/nodes/gpu-1/heartbeat", "node", json=BEAT)  # "node" claims gpu-1
    intruder = _as(api, _token(api, "intruder", "node")["token"])
    detail = intruder.fails(403, "forbidden", "POST", "/nodes/gpu-1/heartbeat", "x", json=BEAT)
    assert "owned by token" in detail["message"]
    assert "weact token rebind gpu-1" in detail["message"]
    # the intruder was not bound by its refused claim: it may still claim a free id
    intruder.ok("POST", "/nodes/gpu-2/heartbeat", "x", json=BEAT)
    # an admin may not create a second token bound to an owned id either
    refused = api.fails(409, "conflict", "POST", "/tokens",
                        json={"name": "twin", "role": "node", "node_id": "gpu-1"})  # fmt: skip
    assert refused["owner_token_id"]


def test_an_admin_rebinds_a_node_id_and_the_old_token_stops(api: Harness) -> None:
    api.ok("POST", "/nodes/gpu-1/heartbeat", "node", json=BEAT)
    spare = _token(api, "gpu-1-new", "node")
    newcomer = _as(api, spare["token"])
    newcomer.fails(403, "forbidden", "POST", "/nodes/gpu-1/heartbeat", "x", json=BEAT)
    api.fails(403, "forbidden", "POST", "/nodes/gpu-1/rebind", "approver",
              json={"token_id": spare["id"]})  # fmt: skip
    bound = api.ok("POST", "/nodes/gpu-1/rebind", json={"token_id": spare["id"]})
    assert (bound["id"], bound["node_id"]) == (spare["id"], "gpu-1")
    newcomer.ok("POST", "/nodes/gpu-1/heartbeat", "x", json=BEAT)
    api.fails(401, "unauthorized", "POST", "/nodes/gpu-1/heartbeat", "node", json=BEAT)
    events = api.ok("GET", "/events?limit=1000", "reader")
    assert [e["subject"] for e in events if e["action"] == "node.rebind"] == ["node:gpu-1"]


def test_racing_first_claims_of_one_node_id_have_one_winner(api: Harness) -> None:
    from live import at_once, statuses

    secrets = [_token(api, f"racer-{i}", "node")["token"] for i in range(8)]

    def claim(i: int) -> Any:
        headers = {"Authorization": f"Bearer {secrets[i]}"}
        return api.client.post("/v1/nodes/contested/heartbeat", json=BEAT, headers=headers)

    codes = statuses(at_once(claim, threads=8))
    assert sorted(codes) == [200] + [403] * 7, codes


# -- principal names -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("principal", "why"),
    [
        ("alice ", "whitespace"),
        (" alice", "whitespace"),
        ("alice\u200b", "U+200B"),  # zero-width space
        ("al\u202eice", "U+202E"),  # right-to-left override
        ("al\x07ice", "U+0007"),
        ("ａｌｉｃｅ", "'alice'"),  # full-width: NFKC gives "alice"
        ("ﬁona", "'fiona'"),  # the fi ligature
    ],
)
def test_malformed_principal_names_are_refused(api: Harness, principal: str, why: str) -> None:
    body = {"name": "t", "principal": principal, "role": "approver"}
    detail = api.fails(422, "invalid", "POST", "/tokens", json=body)
    assert why in str(detail)


@pytest.mark.parametrize("principal", ["Alice", "ALICE", "alicE"])
def test_a_name_differing_only_by_case_is_refused(api: Harness, principal: str) -> None:
    """ "alice" exists (the harness's publisher); "Alice" could approve alice's work."""
    body = {"name": "t", "principal": principal, "role": "approver"}
    detail = api.fails(409, "conflict", "POST", "/tokens", json=body)
    assert detail["principal"] == "alice"


def test_the_same_principal_gets_more_tokens(api: Harness) -> None:
    made = _token(api, "alice-ci", "publisher", principal="alice")
    assert made["name"] == "alice-ci"
    _token(api, "Zoë", "reader")  # a non-ASCII name in NFKC form is fine


# -- the last admin ------------------------------------------------------------------------------


def _admin_ids(api: Harness, who: str = "admin") -> list[int]:
    return [t["id"] for t in api.ok("GET", "/tokens", who) if t["role"] == "admin"]


def test_the_last_admin_token_cannot_be_revoked(api: Harness) -> None:
    (root,) = _admin_ids(api)
    detail = api.fails(409, "conflict", "POST", f"/tokens/{root}/revoke")
    assert detail["rule"] == "last_admin"
    assert "last admin token" in detail["message"]
    second = _as(api, _token(api, "root2", "admin")["token"])
    second.ok("POST", f"/tokens/{root}/revoke", "x")
    (remaining,) = _admin_ids(second, "x")
    second.fails(409, "conflict", "POST", f"/tokens/{remaining}/revoke", "x")


# -- tags ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("who", "status"),
    [("publisher", 200), ("approver", 200), ("admin", 200), ("other", 403), ("reader", 403)],
)
def test_only_the_publisher_approvers_and_admins_change_tags(
    world: World, who: str, status: int
) -> None:
    api = world.api
    adapter = world.approved("write", seed=1)  # published by alice
    api.tokens["other"] = _token(api, "mallory", "publisher")["token"]
    body = {"set": {"stage": "prod"}, "remove": []}
    response = api.request("POST", f"/adapters/{adapter['id']}/tags", who, json=body)
    assert response.status_code == status, response.text
    tags = api.ok("GET", f"/adapters/{adapter['id']}", "reader")["tags"]
    assert tags == ({"stage": "prod"} if status == 200 else {})


def test_weact_token_rebind_documents_and_does_it(sqlite_api: Harness) -> None:
    import json
    import subprocess
    import sys
    from pathlib import Path

    weact = str(Path(sys.executable).with_name("weact"))
    shown = subprocess.run([weact, "token", "rebind", "--help"], capture_output=True, text=True)
    assert "first node token that claims it" in " ".join(shown.stdout.split())
    api = sqlite_api
    api.ok("POST", "/nodes/gpu-1/heartbeat", "node", json=BEAT)
    spare = _token(api, "gpu-1-new", "node")
    done = subprocess.run(
        [weact, "token", "rebind", "gpu-1", str(spare["id"]), "--database-url", api.db.url,
         "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["token_id"] == spare["id"]
    _as(api, spare["token"]).ok("POST", "/nodes/gpu-1/heartbeat", "x", json=BEAT)


def test_the_last_admin_rule_holds_in_the_database_too(tmp_path: Any) -> None:
    """`weact token revoke --database-url` refuses it as the API does (exit 1, one line)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    url = f"sqlite:///{tmp_path / 'registry.db'}"
    weact = str(Path(sys.executable).with_name("weact"))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [weact, "token", *args, "--database-url", url]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)

    made = json.loads(run("create", "--name", "ops", "--role", "admin", "--json").stdout)
    refused = run("revoke", str(made["id"]))
    assert refused.returncode == 1
    assert "last admin token" in refused.stderr
