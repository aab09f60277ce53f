"""The CLI without surprises, through the real `weact` console script against the registry
served over HTTP from the test process (`support.serving.registry_in_process`).

- `weact promote` to a channel that does not exist is refused unless `--create` (the API
  needs `create: true` too), and nothing is created; `weact gate` on an unknown channel is
  exit 2 ("could not check"), so a CI job with a typo never goes green.
- `weact token create|list|revoke` talk to the running registry when a registry URL and
  an admin token are configured, and otherwise name the database they used.
- Tables never cut a digest: written to a pipe, every digest is whole on its line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import factories
import httpx
import pytest
from support.serving import InProcessRegistry, registry_in_process

from registry.client import RegistryClient

WEACT = Path(sys.executable).with_name("weact")


@dataclass
class Cli:
    registry: InProcessRegistry
    cwd: Path

    def run(
        self, *args: str | Path, token: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("WEACT_")}
        base.pop("COLUMNS", None)
        full = {**base, "WEACT_URL": self.registry.url, **(env or {})}
        if token is not None:
            full["WEACT_TOKEN"] = token
        return subprocess.run(
            [str(WEACT), *map(str, args)],
            cwd=self.cwd,
            env=full,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def ok(self, *args: str | Path, token: str | None = None) -> Any:
        done = self.run(*args, "--json", token=token)
        assert done.returncode == 0, (args, done.stderr)
        return json.loads(done.stdout)

    def one_line(self, done: subprocess.CompletedProcess[str], code: int) -> str:
        assert done.returncode == code, (done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        return lines[0]


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    workdir = tmp_path / "serve"
    workdir.mkdir()
    with registry_in_process(workdir) as registry:
        yield Cli(registry, tmp_path)


@pytest.fixture
def seeded(cli: Cli, tmp_path: Path) -> dict[str, Any]:
    """A backbone, the capability `write` and one approved adapter; tokens by role.

    Made through the client library: the `weact` commands that make them are the subject of
    test_cli_e2e, and four more `weact` runs per test cost seconds."""
    tokens = {
        role: cli.registry.bootstrap_token(name, role)
        for name, role in (("root", "admin"), ("alice", "publisher"), ("bob", "approver"))
    }
    url = cli.registry.url
    admin, alice, bob = (RegistryClient(url, tokens[r]) for r in ("admin", "publisher", "approver"))
    try:
        manifest = factories.backbone_manifest_json(factories.write_backbone(tmp_path / "backbone"))
        backbone = admin.register_backbone(name="tiny", manifest=manifest)
        admin.create_capability(name="write", description="w")
        adapter = factories.write_adapter(tmp_path / "write", seed=1)
        pushed = alice.push_adapter(adapter, capability="write")
        bob.approve(pushed["id"])
    finally:
        for client in (admin, alice, bob):
            client.close()
    return {"tokens": tokens, "adapter": pushed, "backbone": backbone}


def test_promote_to_a_typo_is_refused_unless_create(cli: Cli, seeded: dict[str, Any]) -> None:
    bob = seeded["tokens"]["approver"]
    assignment = ("--adapter", f"write=#{seeded['adapter']['id']}")
    refused = cli.one_line(cli.run("channel", "promote", "prdo", *assignment, token=bob), 1)
    assert refused.startswith("Error: not_found: channel 'prdo' does not exist")
    assert "--create" in refused
    assert cli.ok("channel", "list", token=bob) == []
    # over HTTP too: without `create` the API answers 404 and writes nothing
    answer = httpx.post(
        f"{cli.registry.url}/v1/channels/prdo/promote",
        json={"adapters": {"write": seeded["adapter"]["id"]}},
        headers={"Authorization": f"Bearer {bob}"},
    )
    assert (answer.status_code, answer.json()["error"]) == (404, "not_found")

    made = cli.ok("channel", "promote", "prod", "--create", *assignment, token=bob)
    assert made["revision"]["revision"] == 1
    assert [c["channel"] for c in cli.ok("channel", "list", token=bob)] == ["prod"]
    # --create on a channel that exists is a plain promotion (no second channel)
    second = factories.write_adapter(cli.cwd / "write2", seed=2)
    alice = seeded["tokens"]["publisher"]
    pushed = cli.ok("adapter", "push", second, "--capability", "write", token=alice)
    cli.ok("adapter", "approve", str(pushed["id"]), token=bob)
    again = cli.ok(
        "channel", "promote", "prod", "--create", "--adapter", f"write=#{pushed['id']}", token=bob
    )
    assert again["revision"]["revision"] == 2


def test_gate_on_an_unknown_channel_is_exit_2(cli: Cli, seeded: dict[str, Any]) -> None:
    bob = seeded["tokens"]["approver"]
    assignment = ("--adapter", f"write=#{seeded['adapter']['id']}")
    line = cli.one_line(cli.run("channel", "gate", "prdo", *assignment, token=bob), 2)
    assert "channel 'prdo' does not exist" in line
    # the gate of a promotion that would create the channel can be checked
    created = ("--create", "--allow-ungated")  # no benchmark: exit 1 without the flag
    assert cli.run("channel", "gate", "prdo", *created, *assignment, token=bob).returncode == 0
    assert cli.ok("channel", "list", token=bob) == []


def test_token_commands_use_the_running_registry(cli: Cli) -> None:
    admin = cli.registry.bootstrap_token("root", "admin")
    made = cli.ok("token", "create", "--name", "ci", "--role", "publisher", token=admin)
    assert made["registry"] == cli.registry.url
    assert "database" not in made
    # the server knows it: the token works against it, from any directory
    with httpx.Client(base_url=cli.registry.url) as http:
        auth = {"Authorization": f"Bearer {made['token']}"}
        assert http.get("/v1/adapters", headers=auth).status_code == 200
        listed = cli.ok("token", "list", token=admin)
        assert [(t["name"], t["role"]) for t in listed] == [("root", "admin"), ("ci", "publisher")]
        revoked = cli.ok("token", "revoke", str(made["id"]), token=admin)
        assert (revoked["id"], revoked["revoked"], revoked["registry"]) == (
            made["id"],
            True,
            cli.registry.url,
        )
        assert http.get("/v1/adapters", headers=auth).status_code == 401
    again = cli.one_line(cli.run("token", "revoke", str(made["id"]), token=admin), 1)
    assert again.startswith("Error: invalid_state: token")
    missing = cli.one_line(cli.run("token", "revoke", "999", token=admin), 1)
    assert missing == "Error: not_found: token 999 not found"
    # a non-admin token is refused by the server, one line
    refused = cli.run("token", "create", "--name", "x", "--role", "admin", token=made["token"])
    assert cli.one_line(refused, 1).startswith("Error: unauthorized")


def test_token_create_without_a_token_names_the_database(cli: Cli, tmp_path: Path) -> None:
    """From another directory, with WEACT_URL but no admin token: the token goes into the
    database of *that* directory, and the command says so (and that the registry was not
    asked); the running server does not know the token."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [str(WEACT), "token", "create", "--name", "me", "--role", "admin", "--json"],
        cwd=elsewhere,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("WEACT_")},
            "WEACT_URL": cli.registry.url,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    assert made["database"] == "sqlite:///./.weact/registry.db"
    assert (elsewhere / ".weact" / "registry.db").is_file()
    assert f"a registry is configured ({cli.registry.url}) but no admin token" in done.stderr
    assert "stored in the database sqlite:///./.weact/registry.db" in done.stderr
    auth = {"Authorization": f"Bearer {made['token']}"}
    assert httpx.get(f"{cli.registry.url}/v1/adapters", headers=auth).status_code == 401


def test_token_revoke_in_the_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEACT_")}

    def weact(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [str(WEACT), "token", *args, "--database-url", url]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)

    made = json.loads(weact("create", "--name", "ops", "--role", "reader", "--json").stdout)
    done = weact("revoke", str(made["id"]), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["database"] == url
    assert json.loads(weact("list", "--json").stdout) == []


def test_tables_never_cut_a_digest(cli: Cli, seeded: dict[str, Any]) -> None:
    """Piped (no terminal, no COLUMNS), every digest a user copies is whole on one line."""
    bob = seeded["tokens"]["approver"]
    served = f"write=#{seeded['adapter']['id']}"
    cli.ok("channel", "promote", "prod", "--create", "--adapter", served, token=bob)
    revision = cli.ok("channel", "show", "prod", token=bob)
    digests = [
        revision["library_digest"],
        revision["backbone"],
        seeded["adapter"]["manifest_root"],
    ]
    lineage = ["adapter", "lineage", str(seeded["adapter"]["id"])]
    commands = [["channel", "show", "prod"], ["channel", "list"], ["adapter", "list"], lineage]
    for args in [*commands, ["backbone", "list"]]:
        table = cli.run(*args, token=bob)
        assert table.returncode == 0, table.stderr
        shown = [d for d in digests if any(d in line for line in table.stdout.splitlines())]
        assert shown, (args, table.stdout)
        for digest in digests:
            assert digest[:12] not in table.stdout or digest in table.stdout, (args, table.stdout)
