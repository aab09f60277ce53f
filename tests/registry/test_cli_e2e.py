"""The whole registry lifecycle through the real `weact` console script.

For the lifecycle and S3, `weact serve` runs as a subprocess on a free port (SQLite in a temp
dir; the lifecycle also on PostgreSQL under `-m slow`); the other tests' subject is the
commands, and they run against the registry served from the test process
(`support.serving.registry_in_process`, `weact serve`'s preparation and app). Every step is
another `weact ...` subprocess, parsed from `--json`. Independent steps run concurrently to
keep the suite short.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import factories
import httpx
import pytest
from support.serving import RunningRegistry, registry_in_process

from registry.launcher import embedded_registry

WEACT = Path(sys.executable).with_name("weact")


@dataclass
class Cli:
    """Runs `weact` with WEACT_URL set; `token=` picks the principal."""

    registry: RunningRegistry
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


def parallel(*calls: Callable[[], Any]) -> list[Any]:
    """Run independent CLI calls at the same time (each is its own process)."""
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return [future.result() for future in [pool.submit(call) for call in calls]]


# PostgreSQL doubles the suite's time for what tests/registry already checks per database.
@pytest.mark.parametrize(
    "database_url",
    ["sqlite", pytest.param("postgresql", marks=[pytest.mark.postgres, pytest.mark.slow])],
    indirect=True,
)
def test_the_lifecycle_through_the_cli(cli: Cli, tmp_path: Path) -> None:
    admin, alice, alice_approver, bob = parallel(
        lambda: cli.token("root", "admin"),
        lambda: cli.token("alice", "publisher"),
        lambda: cli.token("alice", "approver"),
        lambda: cli.token("bob", "approver"),
    )
    factories.write_backbone(tmp_path / "backbone")
    backbone = cli.ok("backbone", "register", tmp_path / "backbone", "--name", "tiny", token=admin)
    assert backbone["tensor_count"] == len(factories.backbone_shapes())
    root = backbone["root"]
    caps = ("plan", "search", "write")
    made = parallel(
        *(
            functools.partial(
                cli.ok, "capability", "create", cap, "--description", f"{cap} phase",
                "--order", str(order), token=admin,
            )
            for order, cap in enumerate(caps)
        )
    )  # fmt: skip
    assert made == [
        {"name": c, "description": f"{c} phase", "order": i} for i, c in enumerate(caps)
    ]

    dirs = {
        cap: factories.write_adapter(tmp_path / "adapters" / cap, seed=seed)
        for seed, cap in enumerate((*caps, "write++"), 1)
    }
    pushed = parallel(
        *(
            functools.partial(
                cli.ok, "adapter", "push", dirs[cap], "--capability", cap, token=alice
            )
            for cap in caps
        )
    )
    assert [(a["name"], a["state"], a["backbone"]) for a in pushed] == [
        (f"{cap}@1", "candidate", root) for cap in caps
    ]
    ids = {a["capability"]: a["id"] for a in pushed}

    refused = cli.fails("adapter", "approve", str(ids["plan"]), token=alice_approver)
    assert "forbidden" in refused
    approved = parallel(
        *(functools.partial(cli.ok, "adapter", "approve", str(i), token=bob) for i in ids.values())
    )
    assert {a["state"] for a in approved} == {"approved"}

    assignments = [arg for cap in caps for arg in ("--adapter", f"{cap}=#{ids[cap]}")]
    assert (
        cli.run("channel", "gate", "prod", *assignments, token=bob).returncode == 2
    )  # no channel yet
    ungated = cli.run("channel", "gate", "prod", "--create", *assignments, token=bob)
    assert ungated.returncode == 1  # covered by no benchmark: nothing proves it
    assert "gate: passed, UNGATED (no benchmark covers this change)" in ungated.stdout
    assert "define one (weact benchmark create) or pass --allow-ungated" in ungated.stderr
    allowed = ("--create", "--allow-ungated")
    assert cli.run("channel", "gate", "prod", *allowed, *assignments, token=bob).returncode == 0
    order = ("--order", "plan,search,write")
    first = cli.ok("channel", "promote", "prod", "--create", *assignments, *order, token=bob)[
        "revision"
    ]
    assert first["revision"] == 1
    assert first["order"] == list(caps)
    assert {cap: entry["adapter_id"] for cap, entry in first["library"].items()} == ids

    provenance = {"data_digests": ["d" * 64], "capabilities": ["write"], "seed": 7}
    (tmp_path / "provenance.json").write_text(json.dumps(provenance))
    update = cli.ok(
        "adapter", "push", dirs["write++"], "--capability", "write",
        "--parent", str(ids["write"]), "--label", "write++", "--backbone", root,
        "--provenance", tmp_path / "provenance.json", token=alice,
    )  # fmt: skip
    assert (update["name"], update["label"], update["parent_id"]) == (
        "write@2",
        "write++",
        ids["write"],
    )
    assert {k: update["provenance"][k] for k in provenance} == provenance
    assert update["provenance"]["replay"] is False
    cli.ok("adapter", "approve", str(update["id"]), token=bob)
    lineage, parent_lineage = parallel(
        functools.partial(cli.ok, "adapter", "lineage", str(update["id"]), token=alice),
        functools.partial(cli.ok, "adapter", "lineage", str(ids["write"]), token=alice),
    )
    assert [a["id"] for a in lineage["ancestors"]] == [ids["write"]]
    assert lineage["descendants"] == []
    assert [a["id"] for a in parent_lineage["descendants"]] == [update["id"]]

    second = cli.ok(
        "channel", "promote", "prod", "--adapter", f"write=#{update['id']}",
        "--expected-revision", "1", token=bob,
    )["revision"]  # fmt: skip
    assert second["revision"] == 2
    assert second["library"]["write"]["adapter_id"] == update["id"]
    assert second["library"]["plan"] == first["library"]["plan"]
    stale = cli.fails(
        "channel", "rollback", "prod", "--to", "1", "--expected-revision", "1", token=bob
    )
    assert "revision_conflict" in stale

    third = cli.ok("channel", "rollback", "prod", "--to", "1", token=bob)
    assert third["revision"] == 3
    assert third["library_digest"] == first["library_digest"]
    assert cli.ok("adapter", "revoke", str(update["id"]), token=bob)["state"] == "revoked"

    shown, waited, revisions, listed, audit, *_ = parallel(
        functools.partial(cli.ok, "channel", "show", "prod", token=alice),
        functools.partial(
            cli.ok, "channel", "wait", "prod", "--after", "3", "--wait", "0.2", token=alice
        ),
        functools.partial(cli.ok, "channel", "revisions", "prod", token=alice),
        functools.partial(cli.ok, "adapter", "list", "--capability", "write", token=alice),
        functools.partial(cli.ok, "audit", "events", "--list", token=alice),
        *(
            functools.partial(
                cli.ok, "adapter", "pull", str(ids[cap]), "--to", tmp_path / "pulled" / cap,
                token=alice,
            )
            for cap in ("plan", "write")
        ),
    )  # fmt: skip
    assert shown["revision"] == 3
    assert waited is None  # nothing after revision 3 within the wait
    assert [r["revision"] for r in revisions] == [1, 2, 3]
    assert {a["name"]: a["state"] for a in listed["items"]} == {
        "write@1": "approved",
        "write@2": "revoked",
    }
    for cap in ("plan", "write"):
        assert pushed_files(tmp_path / "pulled" / cap) == pushed_files(dirs[cap])
    assert audit["verification"]["ok"] is True
    assert audit["verification"]["count"] == len(audit["events"]) > 0
    expected = {"adapter.approve", "adapter.revoke", "channel.promote", "channel.rollback"}
    assert expected <= {event["action"] for event in audit["events"]}


def test_people_get_tables_and_errors_are_one_line(sqlite_cli: Cli, tmp_path: Path) -> None:
    cli = sqlite_cli
    admin = cli.token("root", "admin")
    done = cli.run("capability", "create", "plan", "--description", "plan it", token=admin)
    assert done.returncode == 0
    assert done.stdout == "created capability plan\n"  # a mutation: one line
    assert "plan it" in cli.run("capability", "list", token=admin).stdout
    table, missing, anonymous, duplicate, not_peft = parallel(
        functools.partial(cli.run, "capability", "list", token=admin),
        functools.partial(cli.fails, "adapter", "show", "999", token=admin),
        functools.partial(cli.fails, "capability", "list"),
        functools.partial(
            cli.fails, "capability", "create", "plan", "--description", "x", token=admin
        ),
        functools.partial(
            cli.fails, "adapter", "push", tmp_path, "--capability", "plan", token=admin
        ),
    )
    assert table.returncode == 0
    assert "plan" in table.stdout
    assert "{" not in table.stdout  # a table, not JSON
    assert "not_found" in missing
    assert "unauthorized" in anonymous
    assert "conflict" in duplicate
    assert "adapter_config.json" in not_peft

    usage = cli.run("channel", "promote", "prod", "--adapter", "plan", token=admin)
    assert usage.returncode == 2
    assert "CAPABILITY=VERSION (write=2)" in usage.stderr
    nowhere = "http://127.0.0.1:9"
    unreachable = cli.fails("channel", "show", "prod", "--registry", nowhere, token="x")
    assert unreachable.startswith("Error: unavailable: cannot reach the registry")
    gate = ("channel", "gate", "prod", "--adapter", "plan=1")
    assert cli.fails(*gate, "--registry", nowhere, code=2)
    no_database = "postgresql+psycopg://postgres@127.0.0.1:9/none"
    no_db = cli.fails(
        "token", "create", "--name", "x", "--role", "admin", "--database-url", no_database
    )
    assert no_db.startswith("Error: database error:")


@pytest.fixture
def sqlite_cli(tmp_path: Path) -> Iterator[Cli]:
    """The registry on its embedded defaults (SQLite and a blob dir under its workdir),
    served from this process."""
    workdir = tmp_path / "serve"
    workdir.mkdir()
    with registry_in_process(workdir) as registry:
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


def test_serve_on_s3_hands_out_presigned_urls(
    s3_store_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("WEACT_PRESIGN_THRESHOLD_BYTES", "0")  # every blob through a redirect
    workdir = tmp_path / "serve"
    workdir.mkdir()
    with embedded_registry(workdir, store_url=s3_store_url) as registry:
        cli = Cli(registry, tmp_path)
        admin = cli.token("root", "admin")
        factories.write_backbone(tmp_path / "backbone")
        cli.ok("backbone", "register", tmp_path / "backbone", "--name", "tiny", token=admin)
        cli.ok("capability", "create", "plan", "--description", "plan", token=admin)
        adapter_dir = factories.write_adapter(tmp_path / "plan")
        pushed = cli.ok("adapter", "push", adapter_dir, "--capability", "plan", token=admin)
        blob = pushed["files"]["adapter_model.safetensors"]
        headers = {"Authorization": f"Bearer {admin}"}
        redirect = httpx.get(f"{registry.url}/v1/blobs/{blob}", headers=headers)
        assert redirect.status_code == 307
        assert redirect.headers["Location"].startswith(os.environ["WEACT_S3_ENDPOINT_URL"])
        cli.ok("adapter", "pull", str(pushed["id"]), "--to", tmp_path / "pulled", token=admin)
    assert pushed_files(tmp_path / "pulled") == pushed_files(adapter_dir)
    assert not (workdir / ".weact" / "blobs").exists()  # the blobs live in S3 only


def test_gate_refuses_a_regression_with_exit_code_1(sqlite_cli: Cli, tmp_path: Path) -> None:
    """What CI relies on: `weact gate` exits 1 and `weact promote` is refused (409) when the
    candidate scores worse than the serving adapter beyond the benchmark's tolerance."""
    from registry.client import RegistryClient

    cli = sqlite_cli
    admin, alice, bob = parallel(
        lambda: cli.token("root", "admin"),
        lambda: cli.token("alice", "publisher"),
        lambda: cli.token("bob", "approver"),
    )
    factories.write_backbone(tmp_path / "backbone")
    cli.ok("backbone", "register", tmp_path / "backbone", "--name", "tiny", token=admin)
    cli.ok("capability", "create", "write", "--description", "write it", token=admin)
    ids = []
    for seed in (1, 2):
        path = factories.write_adapter(tmp_path / f"write{seed}", seed=seed)
        ids.append(cli.ok("adapter", "push", path, "--capability", "write", token=alice)["id"])
        cli.ok("adapter", "approve", str(ids[-1]), token=bob)
    serving, candidate = ids
    cli.ok("channel", "promote", "prod", "--create", "--adapter", f"write=#{serving}", token=bob)

    with RegistryClient(cli.registry.url, bob) as client:
        client.create_benchmark(
            name="report-quality", version=1, dataset_digest="e" * 64, scope="write",
            metric="accuracy", direction="higher", tolerance=0.02,
        )  # fmt: skip
        for adapter_id, score in ((serving, 0.80), (candidate, 0.70)):
            client.create_evaluation(
                benchmark="report-quality", benchmark_version=1, score=score, n=200,
                adapter_id=adapter_id,
            )  # fmt: skip

    assignment = ("--adapter", f"write=#{candidate}")
    checked = cli.run("channel", "gate", "prod", *assignment, "--json", token=bob)
    assert checked.returncode == 1, checked.stderr
    report = json.loads(checked.stdout)
    assert report["passed"] is False
    [check] = report["checks"]
    assert (check["verdict"], check["baseline"], check["candidate"]) == ("fail", 0.80, 0.70)
    promoting = cli.run("channel", "promote", "prod", *assignment, token=bob)
    assert promoting.returncode == 1
    link = f"{cli.registry.url}/gates?channel=prod"
    assert f"gate: FAILED (1 of 1 checks did not pass); report: {link}" in promoting.stdout
    refused = cli.fails("channel", "promote", "prod", *assignment, token=bob)
    assert "gate_failed" in refused
    assert "report-quality" in refused
    assert cli.ok("channel", "show", "prod", token=bob)["revision"] == 1  # nothing written
