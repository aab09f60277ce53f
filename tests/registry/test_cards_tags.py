"""Model cards, training metadata, tags, search and identical bytes, over real HTTP.

The registry runs as `weact serve` runs it, in this process over real HTTP
(`support.serving.registry_in_process`), on each database (SQLite, PostgreSQL); the client and
the `weact` commands (in this process, through click's runner: their start is what
test_cli_e2e and test_cli_no_surprises check) talk to it:

- an adapter directory's README.md (model card) and training.json travel with the version
  and come back, byte-identical, on pull (client and CLI);
- pushing bytes that a version already has answers 409 naming it (the CLI answers with that
  version), never a second version, also when two pushes race;
- versions take key=value tags (at push and later) and are searched by tag, label,
  capability, parent and text in the card.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import factories
import httpx
import pytest
from click.testing import CliRunner
from support.serving import InProcessRegistry, registry_in_process

from cli.main import app
from registry import errors
from registry.client import RegistryClient

CARD = "# write, v1\n\nWrites the final report. Cites 100% of its sources; résumé in UTF-8.\n"
TRAINING = {"backbone_root": "b" * 64, "capability": "write", "seed": 7, "epochs": 1}


class Ran(NamedTuple):
    """What a `weact` command did: its exit status and what it wrote to each stream."""

    returncode: int
    stdout: str
    stderr: str


@dataclass
class Served:
    registry: InProcessRegistry
    alice: RegistryClient
    bob: RegistryClient
    tokens: dict[str, str]
    tmp: Path

    def weact(self, *args: str | Path, who: str = "publisher") -> Ran:
        """`weact ARGS` as `who`, with no other WEACT_* variable than the URL and token."""
        env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("WEACT_")}
        env |= {"WEACT_URL": self.registry.url, "WEACT_TOKEN": self.tokens[who]}
        done = CliRunner().invoke(app, list(map(str, args)), env=env, catch_exceptions=False)
        return Ran(done.exit_code, done.stdout, done.stderr)

    def adapter_dir(self, name: str, seed: int, card: str | None = None) -> Path:
        directory = factories.write_adapter(self.tmp / name, seed=seed)
        if card is not None:
            (directory / "README.md").write_text(card, encoding="utf-8")
        return directory


@pytest.fixture
def served(database_url: str, tmp_path: Path) -> Iterator[Served]:
    workdir = tmp_path / "serve"
    workdir.mkdir()
    with registry_in_process(workdir, database_url) as registry:
        tokens = {
            role: registry.bootstrap_token(name, role)
            for name, role in (("root", "admin"), ("alice", "publisher"), ("bob", "approver"))
        }
        admin = RegistryClient(registry.url, tokens["admin"])
        backbone = factories.write_backbone(tmp_path / "backbone")
        admin.register_backbone(name="tiny", manifest=factories.backbone_manifest_json(backbone))
        for order, name in enumerate(("plan", "write")):
            admin.create_capability(name=name, description=f"{name} it", order=order)
        alice = RegistryClient(registry.url, tokens["publisher"])
        bob = RegistryClient(registry.url, tokens["approver"])
        try:
            yield Served(registry, alice, bob, tokens, tmp_path)
        finally:
            for client in (admin, alice, bob):
                client.close()


def test_card_and_training_metadata_travel_with_the_version(served: Served) -> None:
    directory = served.adapter_dir("write", seed=1, card=CARD)
    (directory / "training.json").write_text(json.dumps(TRAINING))
    pushed = served.alice.push_adapter(directory, capability="write")
    assert set(pushed["files"]) == {
        "adapter_config.json",
        "adapter_model.safetensors",
        "README.md",
        "training.json",
    }
    assert pushed["card"] == CARD
    assert served.alice.get_adapter(pushed["id"])["card"] == CARD

    pulled = served.alice.pull_adapter(pushed["id"], served.tmp / "pulled")
    by_cli = served.tmp / "pulled-cli"
    done = served.weact("adapter", "pull", str(pushed["id"]), "--to", by_cli, "--json")
    assert done.returncode == 0, done.stderr
    for target in (pulled, by_cli):
        assert sorted(p.name for p in target.iterdir()) == sorted(pushed["files"])
        for path in directory.iterdir():
            assert (target / path.name).read_bytes() == path.read_bytes(), path.name

    shown = served.weact("adapter", "show", str(pushed["id"])).stdout
    assert "# write, v1 (3 lines)" in shown


def test_a_directory_without_a_card_has_none(served: Served) -> None:
    pushed = served.alice.push_adapter(served.adapter_dir("plain", seed=2), capability="write")
    assert (pushed["card"], pushed["tags"]) == (None, {})
    assert set(pushed["files"]) == {"adapter_config.json", "adapter_model.safetensors"}


def test_identical_bytes_answer_with_the_existing_version(served: Served) -> None:
    first = served.alice.push_adapter(served.adapter_dir("a", seed=3), capability="write")
    twin = served.tmp / "twin"
    shutil.copytree(served.tmp / "a", twin)
    (twin / "README.md").write_text("another card, the same weights")
    with pytest.raises(errors.ConflictError) as refused:
        served.alice.push_adapter(twin, capability="write", label="again")
    assert refused.value.status_code == 409
    assert refused.value.detail["adapter_id"] == first["id"]
    assert refused.value.detail["name"] == first["name"]
    assert first["name"] in refused.value.detail["message"]
    assert served.alice.list_adapters()["total"] == 1

    done = served.weact("adapter", "push", twin, "--capability", "write", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert (answer["id"], answer["existing"]) == (first["id"], True)
    assert done.stderr.strip() == (
        f"Note: identical bytes are already {first['name']} (id {first['id']}); "
        "nothing was registered"
    )
    # the same bytes under another capability are another adapter (plan's weights may
    # start as write's), and a fresh push says it is new
    other = served.weact("adapter", "push", twin, "--capability", "plan", "--json")
    assert json.loads(other.stdout)["existing"] is False
    assert served.alice.list_adapters()["total"] == 2


def test_racing_pushes_of_the_same_bytes_make_one_version(served: Served) -> None:
    directory = served.adapter_dir("race", seed=4)
    files = {
        name: served.alice.upload_blob(directory / name)
        for name in ("adapter_config.json", "adapter_model.safetensors")
    }
    backbone = served.alice.list_backbones()[0]["root"]
    body = {"capability": "write", "backbone": backbone, "files": files}
    headers = {"Authorization": f"Bearer {served.tokens['publisher']}"}

    def push(_: int) -> int:
        return httpx.post(
            f"{served.registry.url}/v1/adapters", json=body, headers=headers, timeout=60
        ).status_code

    with ThreadPoolExecutor(max_workers=6) as pool:
        codes = sorted(pool.map(push, range(6)))
    assert codes == [201, 409, 409, 409, 409, 409]
    assert served.alice.list_adapters()["total"] == 1


def test_tags_and_search(served: Served) -> None:
    alice = served.alice
    v1 = alice.push_adapter(
        served.adapter_dir("v1", seed=5, card="Plans with a CHECKLIST of 50% steps."),
        capability="write",
        tags={"team": "research", "dataset": "kb-v2"},
    )
    v2 = alice.push_adapter(
        served.adapter_dir("v2", seed=6, card="Writes reports; no checklist."),
        capability="write",
        parent_id=v1["id"],
        label="write++",
        tags={"team": "research"},
    )
    plan = alice.push_adapter(served.adapter_dir("p", seed=7), capability="plan")
    assert v1["tags"] == {"dataset": "kb-v2", "team": "research"}

    def ids(**query: Any) -> list[int]:
        return [a["id"] for a in alice.list_adapters(**query)["items"]]

    assert ids(tags=["team=research"]) == [v1["id"], v2["id"]]
    assert ids(tags=["team=research", "dataset=kb-v2"]) == [v1["id"]]
    assert ids(tags=["team=other"]) == []
    assert ids(label="write++") == [v2["id"]]
    assert ids(parent_id=v1["id"]) == [v2["id"]]
    assert ids(text="checklist") == [v1["id"], v2["id"]]  # case-insensitive
    assert ids(text="50% steps") == [v1["id"]]  # % and _ are literal
    assert ids(text="50_") == []
    assert ids(capability="plan") == [plan["id"]]
    assert ids(capability="write", tags=["team=research"], text="reports") == [v2["id"]]
    assert ids(sort="newest") == [plan["id"], v2["id"], v1["id"]]
    assert ids(sort="name") == [plan["id"], v1["id"], v2["id"]]  # plan@1, write@1, write@2
    assert ids(sort="label") == [v2["id"], v1["id"], plan["id"]]  # labelled first
    assert ids(sort="newest", limit=1, offset=1) == [v2["id"]]

    tagged = alice.tag_adapter(plan["id"], {"team": "research", "stage": "canary"})
    assert tagged["tags"] == {"stage": "canary", "team": "research"}
    moved = alice.tag_adapter(plan["id"], {"stage": "prod"}, remove=["team"])
    assert moved["tags"] == {"stage": "prod"}
    assert ids(tags=["team=research"]) == [v1["id"], v2["id"]]

    # the CLI: tag, search, --json
    done = served.weact("adapter", "tag", str(v2["id"]), "reviewed=yes", "--remove", "team")
    assert done.returncode == 0, done.stderr
    listed = served.weact("adapter", "list", "--tag", "reviewed=yes", "--text", "REPORTS", "--json")
    assert [a["id"] for a in json.loads(listed.stdout)["items"]] == [v2["id"]]
    newest = served.weact("adapter", "list", "--sort", "newest", "--limit", "1", "--json")
    assert [a["id"] for a in json.loads(newest.stdout)["items"]] == [plan["id"]]
    pushed = served.weact(
        "adapter", "push", served.adapter_dir("v3", seed=8), "--capability", "write",
        "--tag", "team=ops", "--tag", "run=42", "--json",
    )  # fmt: skip
    assert json.loads(pushed.stdout)["tags"] == {"run": "42", "team": "ops"}

    events = [e["action"] for e in served.bob.list_events(limit=1000)]
    assert events.count("adapter.tag") == 3


def test_bad_tags_change_nothing(served: Served) -> None:
    alice = served.alice
    version = alice.push_adapter(served.adapter_dir("t", seed=9), capability="write")
    for put, remove in (({"bad key": "x"}, []), ({"k": ""}, []), ({}, ["missing"])):
        with pytest.raises(errors.InvalidError):
            alice.tag_adapter(version["id"], put, remove)
    with pytest.raises(errors.InvalidError):
        alice.push_adapter(
            served.adapter_dir("t2", seed=10), capability="write", tags={"no spaces": "x"}
        )
    assert alice.get_adapter(version["id"])["tags"] == {}
    assert alice.list_adapters()["total"] == 1
    mallory = served.registry.bootstrap_token("mallory", "publisher")
    with pytest.raises(errors.ForbiddenError):  # another publisher's adapter (issue 25)
        RegistryClient(served.registry.url, mallory).tag_adapter(version["id"], {"k": "v"})
    bad = served.weact("adapter", "list", "--tag", "novalue")
    assert bad.returncode == 2
    assert "expected KEY=VALUE" in bad.stderr
