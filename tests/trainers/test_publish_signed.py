"""`weact train --publish --key K` signs the trained adapter's identity as `weact adapter push
--key` does (issue 28), against a strict `weact serve` (SQLite and PostgreSQL): without the
key the push is refused, with a key the root does not name too, and a key that cannot be
read, or no key for a strict registry, stops the command before any training.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.fleet import PostgresUnavailable, fresh_pg_database
from support.serving import registry_in_process
from trainer_helpers import short

from cli.main import app
from registry.client import RegistryClient
from registry.trust import TrustRoot, check_adapter, create_key, load_public_key, load_signer
from registry.trust.statements import AdapterIdentity
from storage.manifest import manifest_of_path
from trainers.tasks import generate
from trainers.trajectory import write_trajectories

FAST = ["--rank", "2", "--alpha", "4", "--epochs", "1", "--lr", "0.01", "--seed", "1"]


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def database(request: pytest.FixtureRequest) -> Iterator[str | None]:
    if request.param == "sqlite":
        yield None
        return
    try:
        with fresh_pg_database("weact_train_signed") as url:
            yield url
    except PostgresUnavailable as exc:
        pytest.skip(f"PostgreSQL at 127.0.0.1:5432 unavailable: {exc}")


@pytest.fixture(scope="module")
def strict(
    database: str | None, tmp_path_factory: pytest.TempPathFactory, tiny_backbone: Path
) -> Iterator[dict]:
    keys = tmp_path_factory.mktemp("keys")
    for name in ("admin", "publisher", "stranger"):
        create_key(keys, name)
    root = TrustRoot.create([load_public_key(keys / "admin.pub.json")], threshold=1)
    root.add_key("publish:*", load_public_key(keys / "publisher.pub.json"))
    root.sign(load_signer(keys / "admin.key"))
    root.save(keys / "root.json")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("WEACT_TRUST_ROOT", str(keys / "root.json"))
        env.setenv("WEACT_STRICT", "1")
        with registry_in_process(tmp_path_factory.mktemp("registry"), database) as server:
            admin = RegistryClient(server.url, server.bootstrap_token("root", "admin"))
            admin.register_backbone(name="tiny", manifest=manifest_of_path(tiny_backbone).to_json())
            admin.create_capability(name="plan", description="plan adapter", order=0)
            token = admin.create_token(name="alice", role="publisher")["token"]
            yield {"url": server.url, "token": token, "keys": keys, "admin": admin, "root": root}
            admin.close()


def test_train_publish_signs_with_the_key(
    strict: dict, tiny_backbone: Path, tmp_path: Path
) -> None:
    data = write_trajectories(tmp_path / "data.jsonl", short(generate(2, seed=1)))
    keys = strict["keys"]

    def train(out: str, *key: str) -> object:
        args = [
            "train", "--capability", "plan", "--data", str(data), "--backbone",
            str(tiny_backbone), *FAST, "--out", str(tmp_path / out), "--publish",
            "--registry", strict["url"], "--token", strict["token"], *key,
        ]  # fmt: skip
        return CliRunner().invoke(app, args)

    unreadable = train("none", "--key", str(keys / "admin.pub.json"))
    assert unreadable.exit_code == 1
    assert "not a private key file" in unreadable.output
    assert not (tmp_path / "none").exists()  # refused before any training

    unsigned = train("unsigned")
    assert unsigned.exit_code == 1
    assert "this registry is strict: sign the push (--key)" in unsigned.output
    assert not (tmp_path / "unsigned").exists()
    stranger = train("stranger", "--key", str(keys / "stranger.key"))
    assert stranger.exit_code == 1
    assert "0 of 1 publish signature(s)" in stranger.output

    signed = train("signed", "--key", str(keys / "publisher.key"))
    assert signed.exit_code == 0, signed.output
    line = next(x for x in signed.output.splitlines() if x.startswith("published "))
    adapter = strict["admin"].get_adapter(int(line.split("(id ")[1].split(",")[0]))
    assert adapter["manifest_root"] == manifest_of_path(tmp_path / "signed").root
    (signature,) = strict["admin"].list_signatures(adapter["id"])
    assert (signature["kind"], signature["keyid"]) == (
        "publish", load_public_key(keys / "publisher.pub.json").keyid,
    )  # fmt: skip
    identity = AdapterIdentity(
        "plan", adapter["manifest_root"], adapter["backbone"], None,
        adapter["files"]["adapter_config.json"],
    )  # fmt: skip
    verdict = check_adapter(strict["root"], identity, None, [signature["envelope"]])
    assert verdict.publishers == [signature["keyid"]]
