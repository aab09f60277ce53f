"""The whole registry lifecycle through the real `weact` console script.

`weact serve` runs as a subprocess on a free port (SQLite in a temp dir, and PostgreSQL
when the server is up); every step is another `weact ...` subprocess, parsed from `--json`.
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
import pytest

from cli.demo import EmbeddedRegistry, embedded_registry

WEACT = Path(sys.executable).with_name("weact")


@dataclass
class Cli:
    """Runs `weact` with WEACT_URL set; `token=` picks the principal."""

    registry: EmbeddedRegistry
    cwd: Path

    def run(self, *args: str | Path, token: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "WEACT_URL": self.registry.url, "COLUMNS": "200"}
        env.pop("WEACT_TOKEN", None)
        if token is not None:
            env["WEACT_TOKEN"] = token
        return subprocess.run(
            [str(WEACT), *map(str, args)],
            cwd=self.cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def ok(self, *args: str | Path, token: str | None = None) -> Any:
        """Run with --json; the command must succeed; returns the parsed output."""
        done = self.run(*args, "--json", token=token)
        assert done.returncode == 0, f"weact {args} failed: {done.stderr}"
        return json.loads(done.stdout)

    def fails(self, *args: str | Path, token: str | None = None, code: int = 1) -> str:
        """Run; the command must fail with `code` and one line on stderr; returns it."""
        done = self.run(*args, token=token)
        assert done.returncode == code, (done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        return lines[0]

    def token(self, name: str, role: str) -> str:
        created = self.ok(
            "token", "create", "--name", name, "--role", role,
            "--database-url", self.registry.database_url,
        )  # fmt: skip
        assert created["name"] == name
        assert created["role"] == role
        return str(created["token"])


@pytest.fixture
def cli(database_url: str, tmp_path: Path) -> Iterator[Cli]:
    """`weact serve` over the parametrized database (SQLite, PostgreSQL)."""
    workdir = tmp_path / "serve"
    workdir.mkdir()
    with embedded_registry(workdir, database_url) as registry:
        yield Cli(registry, tmp_path)


def pushed_files(directory: Path) -> dict[str, bytes]:
    return factories.adapter_files(directory)


def test_the_lifecycle_through_the_cli(cli: Cli, tmp_path: Path) -> None:
    admin = cli.token("root", "admin")
    alice = cli.token("alice", "publisher")
    alice_approver = cli.token("alice", "approver")
    bob = cli.token("bob", "approver")

    factories.write_backbone(tmp_path / "backbone")
    backbone = cli.ok("backbone", "register", tmp_path / "backbone", "--name", "tiny", token=admin)
    assert backbone["tensor_count"] == len(factories.backbone_shapes())
    root = backbone["root"]
    for order, cap in enumerate(("plan", "search", "write")):
        made = cli.ok(
            "capability", "create", cap, "--description", f"{cap} phase", "--order", str(order),
            token=admin,
        )  # fmt: skip
        assert made == {"name": cap, "description": f"{cap} phase", "order": order}

    dirs = {
        cap: factories.write_adapter(tmp_path / "adapters" / cap, seed=seed)
        for seed, cap in enumerate(("plan", "search", "write", "write++"), 1)
    }
    ids = {}
    for cap in ("plan", "search", "write"):
        pushed = cli.ok("adapter", "push", dirs[cap], "--capability", cap, token=alice)
        assert (pushed["name"], pushed["state"], pushed["backbone"]) == (
            f"{cap}@1",
            "candidate",
            root,
        )
        ids[cap] = pushed["id"]

    refused = cli.fails("approve", str(ids["plan"]), token=alice_approver)
    assert "forbidden" in refused
    for cap in ("plan", "search", "write"):
        assert cli.ok("approve", str(ids[cap]), token=bob)["state"] == "approved"

    assignments = [arg for cap in ids for arg in ("--adapter", f"{cap}={ids[cap]}")]
    assert cli.run("gate", "prod", *assignments, token=bob).returncode == 0
    first = cli.ok("promote", "prod", *assignments, "--order", "plan,search,write", token=bob)[
        "revision"
    ]
    assert first["revision"] == 1
    assert first["order"] == ["plan", "search", "write"]
    assert {cap: entry["adapter_id"] for cap, entry in first["library"].items()} == ids

    update = cli.ok(
        "adapter", "push", dirs["write++"], "--capability", "write",
        "--parent", str(ids["write"]), "--label", "write++", "--backbone", root,
        token=alice,
    )  # fmt: skip
    assert (update["name"], update["label"], update["parent_id"]) == (
        "write@2",
        "write++",
        ids["write"],
    )
    cli.ok("approve", str(update["id"]), token=bob)
    lineage = cli.ok("adapter", "lineage", str(update["id"]), token=alice)
    assert [a["id"] for a in lineage["ancestors"]] == [ids["write"]]
    assert lineage["descendants"] == []
    assert (
        cli.ok("adapter", "lineage", str(ids["write"]), token=alice)["descendants"][0]["id"]
        == update["id"]
    )

    second = cli.ok(
        "promote", "prod", "--adapter", f"write={update['id']}", "--expected-revision", "1",
        token=bob,
    )["revision"]  # fmt: skip
    assert second["revision"] == 2
    assert second["library"]["write"]["adapter_id"] == update["id"]
    assert second["library"]["plan"] == first["library"]["plan"]
    stale = cli.fails("rollback", "prod", "--to", "1", "--expected-revision", "1", token=bob)
    assert "revision_conflict" in stale

    third = cli.ok("rollback", "prod", "--to", "1", token=bob)
    assert third["revision"] == 3
    assert third["library_digest"] == first["library_digest"]
    assert cli.ok("channel", "show", "prod", token=alice)["revision"] == 3
    assert [r["revision"] for r in cli.ok("channel", "revisions", "prod", token=alice)] == [1, 2, 3]

    assert cli.ok("revoke", str(update["id"]), token=bob)["state"] == "revoked"
    listed = cli.ok("adapter", "list", "--capability", "write", token=alice)
    assert {a["name"]: a["state"] for a in listed["items"]} == {
        "write@1": "approved",
        "write@2": "revoked",
    }

    for cap in ("plan", "write"):
        target = tmp_path / "pulled" / cap
        cli.ok("adapter", "pull", str(ids[cap]), "--to", target, token=alice)
        assert pushed_files(target) == pushed_files(dirs[cap])

    verified = cli.ok("audit", "events", "--list", token=alice)
    assert verified["verification"]["ok"] is True
    actions = {event["action"] for event in verified["events"]}
    assert verified["verification"]["count"] == len(verified["events"]) > 0
    assert len(actions) > 3


def test_people_get_tables_and_errors_are_one_line(cli: Cli, tmp_path: Path) -> None:
    admin = cli.token("root", "admin")
    done = cli.run("capability", "create", "plan", "--description", "plan it", token=admin)
    assert done.returncode == 0
    assert "plan it" in done.stdout
    table = cli.run("capability", "list", token=admin)
    assert table.returncode == 0
    assert "plan" in table.stdout
    assert "{" not in table.stdout  # a table, not JSON

    assert "not_found" in cli.fails("adapter", "show", "999", token=admin)
    assert "unauthorized" in cli.fails("capability", "list")
    assert "conflict" in cli.fails(
        "capability", "create", "plan", "--description", "x", token=admin
    )
    assert "adapter_config.json" in cli.fails(
        "adapter", "push", tmp_path, "--capability", "plan", token=admin
    )
    usage = cli.run("promote", "prod", "--adapter", "plan", token=admin)
    assert usage.returncode == 2
    assert "CAPABILITY=ID" in usage.stderr
    unreachable = subprocess.run(
        [str(WEACT), "channel", "show", "prod", "--url", "http://127.0.0.1:9", "--token", "x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert unreachable.returncode == 1
    assert unreachable.stderr.strip().startswith("Error: cannot reach the registry")
    assert "Traceback" not in unreachable.stderr
    unchecked = cli.run("gate", "prod", "--adapter", "plan=1", "--url", "http://127.0.0.1:9")
    assert unchecked.returncode == 2


@pytest.fixture
def sqlite_cli(tmp_path: Path) -> Iterator[Cli]:
    """`weact serve` on its embedded defaults: SQLite and a blob dir under its workdir."""
    workdir = tmp_path / "serve"
    workdir.mkdir()
    with embedded_registry(workdir) as registry:
        yield Cli(registry, tmp_path)


def test_a_pulled_adapter_loads_with_peft(sqlite_cli: Cli, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    peft = pytest.importorskip("peft")
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        vocab_size=128,
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path / "llama")

    def base_model() -> Any:
        return transformers.LlamaForCausalLM.from_pretrained(tmp_path / "llama").eval()

    lora = peft.LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False
    )
    trained = peft.get_peft_model(base_model(), lora).eval()
    trained.save_pretrained(tmp_path / "lora")
    tokens = torch.arange(12).unsqueeze(0)
    with torch.no_grad():
        expected = trained(tokens).logits
        bare = base_model()(tokens).logits

    admin = sqlite_cli.token("root", "admin")
    sqlite_cli.ok("backbone", "register", tmp_path / "llama", "--name", "llama", token=admin)
    sqlite_cli.ok("capability", "create", "plan", "--description", "plan", token=admin)
    pushed = sqlite_cli.ok(
        "adapter", "push", tmp_path / "lora", "--capability", "plan", token=admin
    )
    assert (pushed["rank"], pushed["alpha"]) == (4, 8)
    assert sorted(pushed["target_modules"]) == ["q_proj", "v_proj"]
    pulled = tmp_path / "pulled"
    sqlite_cli.ok("adapter", "pull", str(pushed["id"]), "--to", pulled, token=admin)
    assert pushed_files(pulled) == pushed_files(tmp_path / "lora")

    loaded = peft.PeftModel.from_pretrained(base_model(), pulled).eval()
    with torch.no_grad():
        got = loaded(tokens).logits
    assert torch.equal(got, expected)
    assert not torch.allclose(got, bare, atol=1e-4)  # the adapter changes the outputs
