"""Errors name the action refused and the rule (issue 26): each wording as a test."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from harness import World

WEACT = Path(sys.executable).with_name("weact")


def test_a_refused_role_names_the_action_and_the_role_it_needs(world: World) -> None:
    api = world.api
    write = world.approved("write")
    candidate = world.adapter("write", seed=2)
    cases = [
        (f"/adapters/{write['id']}/revoke", {}, "revoke an adapter"),
        (f"/adapters/{candidate['id']}/reject", {}, "reject an adapter"),
        (f"/adapters/{candidate['id']}/approve", {}, "approve an adapter"),
        ("/channels/prod/promote", {"adapters": {"write": write["id"]}}, "promote into a channel"),
    ]
    for path, body, action in cases:
        detail = api.fails(403, "forbidden", "POST", path, "publisher", json=body)
        assert detail == f"role 'publisher' may not {action}: that needs the approver or admin role"


def test_promoting_a_candidate_says_why_in_a_whole_sentence(world: World) -> None:
    candidate = world.adapter("write")
    body = {"backbone": world.backbone, "adapters": {"write": candidate["id"]}, "create": True}
    detail = world.api.fails(
        409, "invalid_state", "POST", "/channels/prod/promote", "approver", json=body
    )
    assert (
        detail
        == "cannot promote write@1: it is candidate, and a channel serves only approved adapters"
    )


def test_a_misspelt_channel_does_not_exist_and_the_close_one_is_offered(world: World) -> None:
    world.promote({"write": world.approved("write")["id"]})
    for path in ("/channels/prdo", "/channels/prdo/revisions"):
        detail = world.api.fails(404, "not_found", "GET", path, "reader")
        assert detail == "channel 'prdo' does not exist (did you mean 'prod'?)"
    body = {"adapters": {}, "order": ["write"]}
    detail = world.api.fails(
        404, "not_found", "POST", "/channels/prdo/promote", "approver", json=body
    )
    assert detail == (
        "channel 'prdo' does not exist (did you mean 'prod'?); create it explicitly: "
        "`weact channel promote --create`"
    )


def test_serve_on_a_busy_port_is_one_line_exit_1_and_creates_nothing(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("WEACT_")}
        done = subprocess.run(
            [str(WEACT), "serve", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"Error: cannot serve on 127.0.0.1:{port}: the port is in use (another `weact serve`?); "
        "choose another with --port"
    ]
    assert done.stdout == ""
    assert list(tmp_path.iterdir()) == []  # no .weact/registry.db, no blob directory
