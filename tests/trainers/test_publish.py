"""Publishing through the real registry over HTTP (served in-process by `registry_server`).

LoRA-code is added as a new capability and write -> write++ is published with lineage; both
leave the backbone and every other adapter bit-identical. Replayed data and changed frozen
weights are refused before anything is uploaded.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.serving import InProcessRegistry
from trainer_helpers import short

from cli.main import app
from registry.client import RegistryClient
from registry.errors import ReplayError
from storage.manifest import manifest_of_path
from trainers.errors import RootChangedError
from trainers.publish import publish_adapter
from trainers.tasks import generate
from trainers.trajectory import write_trajectories

FAST = ["--rank", "2", "--alpha", "4", "--epochs", "1", "--lr", "0.01", "--seed", "1"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def registry(registry_server: InProcessRegistry, tiny_backbone: Path) -> Iterator[dict]:
    url = registry_server.url
    admin = RegistryClient(url, registry_server.bootstrap_token("root", "admin"))
    publisher = admin.create_token(name="alice", role="publisher")["token"]
    admin.register_backbone(name="tiny", manifest=manifest_of_path(tiny_backbone).to_json())
    for order, cap in enumerate(["plan", "search", "write", "code"]):
        admin.create_capability(name=cap, description=f"{cap} adapter", order=order)
    with RegistryClient(url, publisher) as client:
        yield {"url": url, "token": publisher, "client": client, "admin": admin}
    admin.close()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("data")
    sets = {
        "base": short(generate(2, seed=1)),
        "code": short(generate(2, seed=2, phases=("plan", "search", "write", "code"))),
        "write2": short(generate(2, seed=3, write_style="markdown")),
    }
    return {name: write_trajectories(root / f"{name}.jsonl", t) for name, t in sets.items()}


def _train(backbone: Path, out: Path, capability: str, data: Path, *extra: str) -> Any:
    args = ["train", "--capability", capability, "--data", str(data), "--backbone", str(backbone)]
    result = CliRunner().invoke(app, [*args, *FAST, "--out", str(out), *extra])
    return result


def _published(registry: dict, result: Any) -> dict:
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("published "))
    return registry["client"].get_adapter(int(line.split("(id ")[1].split(",")[0]))


@pytest.fixture(scope="module")
def library(registry, data, tiny_backbone, tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("library")
    pub = ["--publish", "--registry", registry["url"], "--token", registry["token"]]
    out: dict[str, Any] = {"dirs": {}, "adapters": {}}
    frozen: list[str] = []
    for cap in ["plan", "search", "write"]:
        result = _train(tiny_backbone, root / cap, cap, data["base"], *frozen, *pub)
        out["adapters"][cap] = _published(registry, result)
        out["dirs"][cap] = root / cap
        frozen += ["--adapter", f"{cap}={root / cap}"]
    out["frozen"] = frozen
    return out


def test_published_with_provenance(library, data, tiny_backbone) -> None:
    write = library["adapters"]["write"]
    prov = write["provenance"]
    assert write["backbone"] == manifest_of_path(tiny_backbone).root
    assert write["manifest_root"] == manifest_of_path(library["dirs"]["write"]).root
    assert prov["data_digests"] == [_sha(data["base"])]
    assert prov["capabilities"] == ["write"]
    assert prov["replay"] is False
    assert prov["seed"] == 1
    assert prov["code_version"]
    assert prov["trainer"]["settings"]["rank"] == 2
    assert set(prov["trainer"]["roots"]) == {"backbone", "adapter:plan", "adapter:search"}


def test_code_added_and_write_plus_plus_with_lineage(
    registry, library, data, tiny_backbone, tmp_path
) -> None:
    client = registry["client"]
    before = {p: _sha(p) for p in sorted(tiny_backbone.iterdir()) if p.is_file()}
    for d in library["dirs"].values():
        before |= {p: _sha(p) for p in sorted(d.iterdir())}
    pub = ["--publish", "--registry", registry["url"], "--token", registry["token"]]
    code = _published(
        registry,
        _train(tiny_backbone, tmp_path / "code", "code", data["code"], *library["frozen"], *pub),
    )
    assert (code["capability"], code["version"], code["parent_id"]) == ("code", 1, None)
    old_write = library["adapters"]["write"]
    others = ["--adapter", f"code={tmp_path / 'code'}", *library["frozen"][:4]]
    plus = _published(
        registry,
        _train(
            tiny_backbone,
            tmp_path / "write++",
            "write",
            data["write2"],
            "--init",
            str(library["dirs"]["write"]),
            *others,
            *pub,
            "--parent",
            str(old_write["id"]),
            "--label",
            "write++",
        ),
    )
    assert (plus["capability"], plus["version"], plus["label"]) == ("write", 2, "write++")
    lineage = client.lineage(plus["id"])
    assert [a["id"] for a in lineage["ancestors"]] == [old_write["id"]]
    assert plus["manifest_root"] != old_write["manifest_root"]
    # nothing else moved: backbone files, the other adapters' files and their registry entries
    assert {p: _sha(p) for p in before} == before
    for cap in ["plan", "search", "write"]:
        entry = client.get_adapter(library["adapters"][cap]["id"])
        assert entry["files"] == library["adapters"][cap]["files"]


def _count(client: RegistryClient) -> int:
    return client.list_adapters()["total"]


def test_replay_of_old_data_refused_unless_allowed(
    registry, library, data, tiny_backbone, tmp_path
) -> None:
    client = registry["client"]
    write = library["adapters"]["write"]
    shutil.copytree(library["dirs"]["write"], tmp_path / "again")  # trained on the parent's data
    weights = tmp_path / "again" / "adapter_model.safetensors"  # other weights: identical
    data = weights.read_bytes()  # bytes would be the parent itself (409), not a replay
    weights.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    n = _count(client)
    with pytest.raises(ReplayError, match="already used by an ancestor"):
        publish_adapter(
            tmp_path / "again", client=client, capability="write", parent_id=write["id"]
        )
    assert _count(client) == n
    again = publish_adapter(
        tmp_path / "again",
        client=client,
        capability="write",
        parent_id=write["id"],
        allow_replay=True,
    )
    assert again["provenance"]["replay"] is True


def test_other_capabilities_supervised_is_replay(registry, data, tiny_backbone, tmp_path) -> None:
    client = registry["client"]
    result = CliRunner().invoke(
        app,
        ["train", "--shared", "--data", str(data["base"]), "--backbone", str(tiny_backbone)]
        + [*FAST, "--out", str(tmp_path / "shared")],
    )
    assert result.exit_code == 0, result.output
    n = _count(client)
    with pytest.raises(ReplayError, match="other capabilities"):
        publish_adapter(tmp_path / "shared", client=client, capability="write")
    cli = CliRunner().invoke(
        app,
        ["train", "publish", str(tmp_path / "shared"), "--capability", "write"]
        + ["--registry", registry["url"], "--token", registry["token"]],
    )
    assert cli.exit_code == 1
    assert "other capabilities" in cli.output
    assert _count(client) == n


def _error_line(result: Any) -> str:
    return next(x for x in result.output.splitlines() if x.startswith("Error: "))


def _error_line(result: Any) -> str:
    return next(x for x in result.output.splitlines() if x.startswith("Error: "))


def _trained_copy(source: Path, to: Path, flip: int) -> Path:
    """A copy of a trained directory with one bit of its weights flipped at byte -`flip`
    (bytes no version has: not the source's, nor another test's copy)."""
    shutil.copytree(source, to)
    weights = to / "adapter_model.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-flip] ^= 1
    weights.write_bytes(bytes(raw))
    return to


def test_push_of_a_trained_directory_runs_the_replay_check(registry, library, tmp_path) -> None:
    client, write = registry["client"], library["adapters"]["write"]
    again = _trained_copy(library["dirs"]["write"], tmp_path / "again", flip=3)
    where = ["--registry", registry["url"], "--token", registry["token"]]
    target = ["--capability", "write", "--parent", f"#{write['id']}", *where]
    n = _count(client)
    published = CliRunner().invoke(app, ["train", "publish", str(again), *target])
    pushed = CliRunner().invoke(app, ["adapter", "push", str(again), *target])
    assert (published.exit_code, pushed.exit_code) == (1, 1)
    assert _error_line(pushed) == _error_line(published)
    assert "data already used by an ancestor" in _error_line(pushed)
    assert _count(client) == n
    allowed = ["adapter", "push", str(again), *target, "--allow-replay", "--json"]
    result = CliRunner().invoke(app, allowed)
    assert result.exit_code == 0, result.output
    version = json.loads(result.output)
    assert (version["existing"], version["parent_id"]) == (False, write["id"])
    assert version["provenance"]["replay"] is True
    assert version["provenance"]["data_digests"] == write["provenance"]["data_digests"]
    assert _count(client) == n + 1


def test_push_of_a_directory_without_training_json_is_not_checked(
    registry, library, tmp_path
) -> None:
    write = library["adapters"]["write"]
    plain = _trained_copy(library["dirs"]["write"], tmp_path / "plain", flip=5)
    (plain / "training.json").unlink()
    where = ["--registry", registry["url"], "--token", registry["token"], "--json"]
    target = ["--capability", "write", "--parent", f"#{write['id']}", *where]
    result = CliRunner().invoke(app, ["adapter", "push", str(plain), *target])
    assert result.exit_code == 0, result.output
    pushed = json.loads(result.output)
    assert (pushed["existing"], pushed["parent_id"]) == (False, write["id"])
    assert pushed["provenance"]["data_digests"] == []  # nothing stated: nothing checked


def test_publish_refused_when_a_frozen_file_changed(
    registry, library, data, tiny_backbone, tmp_path
) -> None:
    plan = tmp_path / "plan-copy"
    shutil.copytree(library["dirs"]["plan"], plan)
    result = _train(
        tiny_backbone, tmp_path / "search2", "search", data["code"], "--adapter", f"plan={plan}"
    )
    assert result.exit_code == 0, result.output
    weights = plan / "adapter_model.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 0x01  # one flipped bit in the frozen adapter
    weights.write_bytes(bytes(raw))
    n = _count(registry["client"])
    with pytest.raises(RootChangedError) as info:
        publish_adapter(tmp_path / "search2", client=registry["client"], capability="search")
    assert list(info.value.changed) == ["adapter:plan"]
    assert _count(registry["client"]) == n


def test_eval_nll_posts_per_item_scores(registry, library, data, tiny_backbone) -> None:
    admin, write = registry["admin"], library["adapters"]["write"]
    digest = _sha(data["base"])
    admin.create_benchmark(
        name="write-nll", version=1, dataset_digest=digest, scope="write",
        metric="nll", direction="lower", tolerance=0.05,
    )  # fmt: skip
    evaluator = admin.create_token(name="ci", role="evaluator")["token"]
    args = [
        "eval", "nll", "--backbone", str(tiny_backbone), "--data", str(data["base"]),
        "--adapter", f"write={library['dirs']['write']}", "--json",
        "--registry", registry["url"], "--token", evaluator,
    ]  # fmt: skip
    missing = CliRunner().invoke(app, [*args, "--post", "write-nll"])
    assert missing.exit_code == 2
    assert "exactly one of --adapter-id and --library-digest" in missing.output
    target = ["--post", "write-nll", "--adapter-id", str(write["id"]), "--dataset-digest", digest]
    result = CliRunner().invoke(app, [*args, *target])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("posted evaluation ")
    scores = {x["capability"]: x for x in json.loads("\n".join(lines[1:]))}
    (posted,) = registry["client"].list_evaluations(benchmark="write-nll")
    full = registry["client"].get_evaluation(posted["id"])
    assert full["created_by"] == "ci"
    assert full["adapter_id"] == write["id"]
    assert full["n"] == scores["write"]["samples"] == len(full["items"]) == 2
    assert all(key.endswith("#2") for key in full["items"])  # write is the third phase
    assert full["score"] == pytest.approx(sum(full["items"].values()) / 2)
    assert full["provenance"]["dataset_digest"] == digest
    assert full["provenance"]["extra"]["data"] == {str(data["base"]): digest}
