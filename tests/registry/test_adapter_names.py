"""Adapters named as people name them: `write@2` in every command that takes an adapter.

One registry (SQLite, served from a thread of the test process) for the module; each case
pushes a fresh write version and runs its command in-process (click's runner, over real
HTTP) naming it `write@N`, then checks through the API that the command acted on that
version and no other.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import factories
import httpx
import pytest
from click.testing import CliRunner, Result
from support.serving import InProcessRegistry, registry_in_process

from cli.main import app


@dataclass
class World:
    registry: InProcessRegistry
    tmp: Path
    tokens: dict[str, str]
    seeds: Iterator[int] = field(default_factory=lambda: itertools.count(100))

    def run(self, *args: str | Path, who: str = "bob") -> Result:
        env = {"WEACT_URL": self.registry.url, "WEACT_TOKEN": self.tokens[who], "COLUMNS": "200"}
        return CliRunner().invoke(app, [str(a) for a in args], env=env)

    def ok(self, *args: str | Path, who: str = "bob") -> Any:
        done = self.run(*args, "--json", who=who)
        assert done.exit_code == 0, (args, done.output)
        return json.loads(done.stdout)

    def push(self, parent: str | None = None, approve: bool = False) -> dict[str, Any]:
        seed = next(self.seeds)
        directory = factories.write_adapter(self.tmp / f"a{seed}", seed=seed)
        extra = ("--parent", parent) if parent else ()
        pushed = self.ok("adapter", "push", directory, "--capability", "write", *extra, who="alice")
        if approve:
            self.ok("adapter", "approve", f"#{pushed['id']}")
        return dict(pushed)

    def get(self, adapter_id: int) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.tokens['bob']}"}
        answer = httpx.get(f"{self.registry.url}/v1/adapters/{adapter_id}", headers=headers)
        answer.raise_for_status()
        return dict(answer.json())


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("names")
    (tmp / "serve").mkdir()
    with registry_in_process(tmp / "serve") as registry:
        world = World(registry, tmp, {})
        for name, role in (("root", "admin"), ("alice", "publisher"), ("bob", "approver")):
            made = CliRunner().invoke(
                app,
                ["token", "create", "--name", name, "--role", role, "--json",
                 "--database-url", registry.database_url],
            )  # fmt: skip
            assert made.exit_code == 0, made.output
            world.tokens[name] = json.loads(made.stdout)["token"]
        factories.write_backbone(tmp / "backbone")
        world.ok("backbone", "register", tmp / "backbone", "--name", "tiny", who="root")
        world.ok("capability", "create", "write", "--description", "w", who="root")
        first = world.push(approve=True)
        world.ok("channel", "promote", "prod", "--create", "--adapter", f"write=#{first['id']}")
        yield world


Case = Callable[[World, dict[str, Any]], None]


def show(world: World, a: dict[str, Any]) -> None:
    assert world.ok("adapter", "show", a["name"])["id"] == a["id"]


def lineage(world: World, a: dict[str, Any]) -> None:
    assert world.ok("adapter", "lineage", a["name"])["adapter"]["id"] == a["id"]


def tag(world: World, a: dict[str, Any]) -> None:
    world.ok("adapter", "tag", a["name"], "team=names")
    assert world.get(a["id"])["tags"] == {"team": "names"}


def pull(world: World, a: dict[str, Any]) -> None:
    to = world.tmp / f"pulled{a['id']}"
    assert world.ok("adapter", "pull", a["name"], "--to", to)["adapter_id"] == a["id"]
    assert (to / "adapter_model.safetensors").is_file()


def list_children(world: World, a: dict[str, Any]) -> None:
    child = world.push(parent=a["name"])
    assert child["parent_id"] == a["id"]
    assert child["parent_name"] == a["name"]
    listed = world.ok("adapter", "list", "--parent", a["name"])["items"]
    assert [c["id"] for c in listed] == [child["id"]]


def approve(world: World, a: dict[str, Any]) -> None:
    decided = world.ok("adapter", "approve", a["name"])
    assert (decided["id"], decided["state"], decided["decided_by"]) == (a["id"], "approved", "bob")


def reject(world: World, a: dict[str, Any]) -> None:
    world.ok("adapter", "reject", a["name"], "--reason", "worse")
    assert (world.get(a["id"])["state"], world.get(a["id"])["reason"]) == ("rejected", "worse")


def revoke(world: World, a: dict[str, Any]) -> None:
    world.ok("adapter", "approve", f"#{a['id']}")
    world.ok("adapter", "revoke", a["name"], "--reason", "leaks")
    assert world.get(a["id"])["state"] == "revoked"


def promote_and_gate(world: World, a: dict[str, Any]) -> None:
    world.ok("adapter", "approve", a["name"])
    version = str(a["version"])
    gate = world.run("channel", "gate", "prod", "--adapter", f"write={version}", "--json")
    assert gate.exit_code in (0, 1), gate.output  # 2: could not check (an unknown name)
    assert "library_digest" in json.loads(gate.stdout)
    ungated = world.run("channel", "gate", "prod", "--adapter", f"write={version}")
    assert ungated.exit_code == 1  # no benchmark covers the change
    assert "gate: passed, UNGATED (no benchmark covers this change)" in ungated.stdout
    allowed = world.run(
        "channel", "gate", "prod", "--adapter", f"write={version}", "--allow-ungated"
    )
    assert allowed.exit_code == 0, allowed.output
    promoted = world.run("channel", "promote", "prod", "--adapter", f"write={version}")
    assert promoted.exit_code == 0, promoted.output
    link = f"{world.registry.url}/gates?channel=prod"
    assert f"gate: passed, UNGATED (no benchmark covers this change); report: {link}" in (
        " ".join(promoted.stdout.split())
    )
    library = world.ok("channel", "show", "prod")["library"]
    assert library["write"]["adapter_id"] == a["id"]
    again = world.ok(
        "channel", "promote", "prod", "--adapter", a["name"], "--adapter", "write=none"
    )
    assert "write" not in again["revision"]["library"]


@pytest.mark.parametrize(
    "case",
    [show, lineage, tag, pull, list_children, approve, reject, revoke, promote_and_gate],
)
def test_every_adapter_command_takes_capability_at_version(world: World, case: Case) -> None:
    world.push()  # a newer version, so write@N is never simply the newest
    target = world.push()
    world.push()
    case(world, target)


def test_ids_stay_accepted_and_bad_names_are_usage_errors(world: World) -> None:
    a = world.push()
    assert world.ok("adapter", "show", str(a["id"]))["name"] == a["name"]
    assert world.ok("adapter", "show", f"#{a['id']}")["name"] == a["name"]
    missing = world.run("adapter", "show", "write@999")
    assert missing.exit_code == 1
    assert "adapter write@999 does not exist (the newest is write@" in missing.output
    typo = world.run("adapter", "show", "wrte@1")
    assert "capability 'wrte' does not exist (did you mean 'write'?)" in typo.output
    bad = world.run("adapter", "show", "write@two")
    assert bad.exit_code == 2
    assert "name it CAPABILITY@VERSION (e.g. write@2) or by id (#6)" in bad.output


def test_the_resolve_endpoint(world: World) -> None:
    a = world.push()
    headers = {"Authorization": f"Bearer {world.tokens['bob']}"}
    url = f"{world.registry.url}/v1/adapters/by-name"
    assert httpx.get(f"{url}/{a['name']}", headers=headers).json()["id"] == a["id"]
    assert httpx.get(f"{url}/%23{a['id']}", headers=headers).json()["name"] == a["name"]
    missing = httpx.get(f"{url}/write@999", headers=headers)
    assert missing.status_code == 404
    assert missing.json()["error"] == "not_found"


def test_typos_say_does_not_exist_and_offer_the_close_name(world: World) -> None:
    shown = world.run("channel", "show", "prdo")
    assert shown.exit_code == 1
    assert "channel 'prdo' does not exist (did you mean 'prod'?)" in shown.output
    fleet = world.run("nodes", "--channel", "prdo")
    assert fleet.exit_code == 1
    assert "channel 'prdo' does not exist (did you mean 'prod'?)" in fleet.output
    command = world.run("adaptr", "list")
    assert command.exit_code == 2
    assert "No such command 'adaptr'. Did you mean 'adapter'?" in command.output


def test_a_channel_requires_benchmarks_from_the_cli(world: World) -> None:
    unknown = world.run("channel", "require", "prod", "nope")
    assert unknown.exit_code == 1
    assert "benchmark 'nope' does not exist" in unknown.output
    cleared = world.ok("channel", "require", "prod")
    assert cleared["required_benchmarks"] == []
    shown = world.run("channel", "show", "prod")
    assert "gate requires  -" in shown.output
