"""Provenance travels: `weact train` (tiny model) writes training.json and a model card,
`weact adapter push` states the provenance training.json holds, `weact adapter show` prints
it with the approver and the revoke reason, and a revoked version pulls only on purpose."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from click.testing import CliRunner
from support.serving import InProcessRegistry
from trainer_helpers import short

from cli.main import app
from registry.client import RegistryClient
from storage.manifest import manifest_of_path
from trainers.tasks import generate
from trainers.trajectory import write_trajectories

FAST = ["--rank", "2", "--alpha", "4", "--epochs", "1", "--lr", "0.01", "--seed", "3"]


def test_train_push_show_and_pull_keep_the_provenance(
    registry_server: InProcessRegistry, tiny_backbone: Path, tmp_path: Path
) -> None:
    url = registry_server.url
    admin = RegistryClient(url, registry_server.bootstrap_token("root-prov", "admin"))
    publisher = admin.create_token(name="carol", role="publisher")["token"]
    root = manifest_of_path(tiny_backbone).root
    if not any(b["root"] == root for b in admin.list_backbones()):
        admin.register_backbone(name="tiny", manifest=manifest_of_path(tiny_backbone).to_json())
    if not any(c["name"] == "write" for c in admin.list_capabilities()):
        admin.create_capability(name="write", description="write adapter", order=2)
    data = write_trajectories(tmp_path / "data.jsonl", short(generate(2, seed=11)))
    digest = hashlib.sha256(data.read_bytes()).hexdigest()
    out = tmp_path / "write"
    args = ["train", "--capability", "write", "--data", str(data), "--backbone", str(tiny_backbone)]
    trained = CliRunner().invoke(app, [*args, *FAST, "--out", str(out)])
    assert trained.exit_code == 0, trained.output

    training = json.loads((out / "training.json").read_text())
    card = (out / "README.md").read_text()
    assert card.startswith("# write (LoRA adapter)")
    assert f"sha256 `{digest}`" in card
    assert f"manifest root: `{root}`" in card
    assert "- rank: `2`" in card
    assert "- seed: `3`" in card
    assert f"- last step: {training['losses'][-1]:.4f}" in card

    env = {"WEACT_URL": url, "WEACT_TOKEN": publisher, "COLUMNS": "250"}
    pushed = CliRunner().invoke(
        app, ["adapter", "push", str(out), "--capability", "write", "--json"], env=env
    )
    assert pushed.exit_code == 0, pushed.output
    record = json.loads(pushed.stdout)
    assert record["provenance"]["data_digests"] == [digest]
    assert record["provenance"]["seed"] == 3
    assert record["provenance"]["trainer"]["backbone_root"] == root
    assert record["card"] == card
    name = record["name"]
    admin.approve(record["id"])
    admin.revoke(record["id"], "trained on a leaked split")

    shown = CliRunner().invoke(app, ["adapter", "show", name], env=env)
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())
    assert f"data 1 {digest}" in text
    assert f"base {root}" in text
    assert "approved by root-prov" in text
    assert "revoked by root-prov at" in text
    assert ": trained on a leaked split" in text
    loss = training["losses"]
    assert f"loss (NLL) {loss[0]:.4f} -> {loss[-1]:.4f}" in text

    refused = CliRunner().invoke(
        app, ["adapter", "pull", name, "--to", str(tmp_path / "p")], env=env
    )
    assert refused.exit_code == 1
    assert (
        f"refusing to pull: {name} is revoked by root-prov: trained on a leaked split; "
        "--allow-revoked pulls it"
    ) in refused.output
    assert not (tmp_path / "p").exists()
    allowed = CliRunner().invoke(
        app, ["adapter", "pull", name, "--to", str(tmp_path / "p"), "--allow-revoked"], env=env
    )
    assert allowed.exit_code == 0, allowed.output
    assert f"Warning: {name} is revoked by root-prov: trained on a leaked split" in allowed.stderr
    assert (tmp_path / "p" / "README.md").read_text() == card
    admin.close()
