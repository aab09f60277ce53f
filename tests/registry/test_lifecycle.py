"""candidate -> approved | rejected; approved -> revoked; everything else is invalid_state."""

from __future__ import annotations

import pytest
from harness import World

MOVES = {
    ("candidate", "approve"): "approved",
    ("candidate", "reject"): "rejected",
    ("approved", "revoke"): "revoked",
}
SETUP = {
    "candidate": [],
    "approved": ["approve"],
    "rejected": ["reject"],
    "revoked": ["approve", "revoke"],
}


@pytest.mark.parametrize("start", list(SETUP))
@pytest.mark.parametrize("action", ["approve", "reject", "revoke"])
def test_transition_table(sqlite_world: World, start: str, action: str) -> None:
    api = sqlite_world.api
    adapter = sqlite_world.adapter()
    for step in SETUP[start]:
        api.ok("POST", f"/adapters/{adapter['id']}/{step}", "approver", json={})
    expected = MOVES.get((start, action))
    if expected is None:
        before = api.counts()
        api.fails(
            409, "invalid_state", "POST", f"/adapters/{adapter['id']}/{action}", "approver", json={}
        )
        assert api.counts() == before
        assert api.ok("GET", f"/adapters/{adapter['id']}", "reader")["state"] == start
    else:
        result = api.ok(
            "POST", f"/adapters/{adapter['id']}/{action}", "approver", json={"reason": "r"}
        )
        assert result["state"] == expected


def test_publisher_cannot_approve_own_adapter(world: World) -> None:
    api = world.api
    adapter = world.adapter()  # published by alice
    detail = api.fails(
        403, "forbidden", "POST", f"/adapters/{adapter['id']}/approve", "self_approver", json={}
    )
    assert "cannot approve" in detail
    assert api.ok("GET", f"/adapters/{adapter['id']}", "reader")["state"] == "candidate"
    api.ok("POST", f"/adapters/{adapter['id']}/approve", "approver", json={})


def test_versions_are_immutable(world: World) -> None:
    api = world.api
    adapter = world.adapter()
    for method in ("PUT", "PATCH", "DELETE"):
        response = api.request(method, f"/adapters/{adapter['id']}", "admin", json={})
        assert response.status_code == 405
        assert response.json()["error"] == "bad_request"
    assert api.ok("GET", f"/adapters/{adapter['id']}", "reader") == adapter
