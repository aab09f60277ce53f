"""Signed trust through the CLI (issue 28): keys, the offline root, a strict registry.

`weact key create` and `weact root ...` run offline; a strict registry (`weact serve`'s
preparation and app, served from the test process; WEACT_STRICT / WEACT_TRUST_ROOT, as
`--strict --root` set them) refuses a push without a publisher signature that meets the root,
and an approval without an approver's signature.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import factories
import httpx
import pytest
from click.testing import CliRunner
from support.serving import InProcessRegistry, registry_in_process

from cli.main import app


class Ran(NamedTuple):
    """What a `weact` command did: its exit status and what it wrote to each stream."""

    returncode: int
    stdout: str
    stderr: str


@dataclass
class Weact:
    """`weact` run in this process (click's runner) from `cwd`: the commands' subject here is
    signed trust, not their start (test_cli_e2e runs the console script), and a child
    interpreter per command cost most of this file's CPU."""

    cwd: Path
    url: str = ""

    def run(self, *args: str | Path, token: str | None = None) -> Ran:
        env = {"WEACT_URL": self.url, "COLUMNS": "200", "WEACT_TOKEN": token}
        with contextlib.chdir(self.cwd):
            done = CliRunner().invoke(app, list(map(str, args)), env=env, catch_exceptions=False)
        return Ran(done.exit_code, done.stdout, done.stderr)

    def ok(self, *args: str | Path, token: str | None = None) -> Any:
        done = self.run(*args, "--json", token=token)
        assert done.returncode == 0, f"weact {args} failed: {done.stderr}"
        return json.loads(done.stdout)

    def fails(self, *args: str | Path, token: str | None = None) -> str:
        done = self.run(*args, token=token)
        assert done.returncode == 1, (done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        return lines[0]


@pytest.fixture
def weact(tmp_path: Path) -> Weact:
    return Weact(tmp_path)


def make_root(weact: Weact) -> Path:
    for name in ("admin1", "admin2", "pub", "ap1", "ap2", "stranger"):
        made = weact.ok("key", "create", name, "--dir", "keys")
        assert len(made["keyid"]) == 64
        assert oct((weact.cwd / made["private"]).stat().st_mode & 0o777) == "0o600"
    assert "refusing to overwrite" in weact.fails("key", "create", "pub", "--dir", "keys")
    root = weact.cwd / "root.json"
    weact.ok(
        "root", "init", root, "--admin", "keys/admin1.pub.json",
        "--admin", "keys/admin2.pub.json", "--threshold", "2",
    )  # fmt: skip
    weact.ok("root", "add-key", root, "publish", "keys/pub.pub.json")
    weact.ok("root", "add-key", root, "approve:prod", "keys/ap1.pub.json")
    shown = weact.ok("root", "add-key", root, "approve:prod", "keys/ap2.pub.json")
    assert shown["roles"]["approve:prod"]["threshold"] == 1
    assert shown["version"] == 1
    assert "lacks 2 admin signature(s)" in weact.fails("root", "show", root)
    assert "not an admin key" in weact.fails("root", "sign", root, "--key", "keys/pub.key")
    first = weact.run("root", "sign", root, "--key", "keys/admin1.key")
    assert "not yet trusted" in first.stderr
    second = weact.run("root", "sign", root, "--key", "keys/admin2.key")
    assert second.returncode == 0, second.stderr
    assert "version 1 verifies" in second.stderr
    assert len(weact.ok("root", "show", root)["signatures"]) == 2
    return root


@pytest.fixture(scope="session")
def made_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The keys and the root of `make_root`, made through the CLI (and checked) once per
    worker: its sixteen `weact` runs cost seconds, and each strict registry takes a copy."""
    made = Weact(tmp_path_factory.mktemp("signed-cli-root"))
    make_root(made)
    return made.cwd


def copy_root(made: Path, weact: Weact) -> Path:
    """`made_root`'s keys/ and root.json into `weact`'s directory (private keys stay 0600)."""
    shutil.copytree(made / "keys", weact.cwd / "keys")
    return Path(shutil.copy2(made / "root.json", weact.cwd / "root.json"))


@pytest.fixture
def strict(
    weact: Weact, made_root: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[InProcessRegistry]:
    root = copy_root(made_root, weact)
    assert oct((weact.cwd / "keys" / "pub.key").stat().st_mode & 0o777) == "0o600"
    monkeypatch.setenv("WEACT_TRUST_ROOT", str(root))
    monkeypatch.setenv("WEACT_STRICT", "1")
    (weact.cwd / "serve").mkdir()
    with registry_in_process(weact.cwd / "serve", database_url) as server:
        weact.url = server.url
        yield server


def token(server: InProcessRegistry, name: str, role: str) -> str:
    return server.bootstrap_token(name, role)


def test_a_strict_registry_takes_only_signed_pushes_and_approvals(
    weact: Weact, strict: InProcessRegistry, tmp_path: Path
) -> None:
    admin, alice, bob = (
        token(strict, "root", "admin"),
        token(strict, "alice", "publisher"),
        token(strict, "bob", "approver"),
    )
    factories.write_backbone(tmp_path / "backbone")
    weact.ok("backbone", "register", tmp_path / "backbone", "--name", "tiny", token=admin)
    weact.ok("capability", "create", "write", "--description", "w", token=admin)
    adapter = factories.write_adapter(tmp_path / "write", seed=3)
    push = ("adapter", "push", adapter, "--capability", "write")

    assert "this registry is strict" in weact.fails(*push, token=alice)
    assert "0 of 1 publish signature(s)" in weact.fails(
        *push, "--key", "keys/stranger.key", token=alice
    )
    pushed = weact.ok(*push, "--key", "keys/pub.key", token=alice)
    assert pushed["existing"] is False  # the refused pushes left no version behind

    approve = ("adapter", "approve", str(pushed["id"]))
    assert "sign the approval" in weact.fails(*approve, token=bob)
    assert "in no approve role" in weact.fails(*approve, "--key", "keys/stranger.key", token=bob)
    assert "in no approve role" in weact.fails(*approve, "--key", "keys/pub.key", token=bob)
    assert weact.ok(*approve, "--key", "keys/ap1.key", token=bob)["state"] == "approved"

    pulled = tmp_path / "pulled"
    weact.ok("adapter", "pull", str(pushed["id"]), "--to", pulled, token=bob)
    verdict = weact.ok("adapter", "verify", pulled, "--root", "root.json", "--channel", "prod")
    assert (verdict["capability"], len(verdict["publishers"]), len(verdict["approvers"])) == (
        "write", 1, 1,
    )  # fmt: skip
    assert "no approve role for 'staging'" in weact.fails(
        "adapter", "verify", pulled, "--root", "root.json", "--channel", "staging"
    )
    config = json.loads((pulled / "adapter_config.json").read_text())
    (pulled / "adapter_config.json").write_text(json.dumps({**config, "lora_alpha": 999}))
    assert "no publisher statement names these weights" in weact.fails(
        "adapter", "verify", pulled, "--root", "root.json"
    )

    listed = httpx.get(
        f"{strict.url}/v1/adapters/{pushed['id']}/signatures",
        headers={"Authorization": f"Bearer {bob}"},
    ).json()
    assert listed["strict"] is True
    assert [(s["kind"], s["created_by"]) for s in listed["items"]] == [
        ("publish", "alice"),
        ("approve", "bob"),
    ]


def test_a_development_registry_takes_unsigned_pushes_and_serves_signatures(
    weact: Weact, tmp_path: Path
) -> None:
    (tmp_path / "serve").mkdir()
    with registry_in_process(tmp_path / "serve") as server:
        weact.url = server.url
        admin, alice = token(server, "root", "admin"), token(server, "alice", "publisher")
        factories.write_backbone(tmp_path / "backbone")
        weact.ok("backbone", "register", tmp_path / "backbone", "--name", "tiny", token=admin)
        weact.ok("capability", "create", "write", "--description", "w", token=admin)
        pushed = weact.ok(
            "adapter", "push", factories.write_adapter(tmp_path / "w", seed=4),
            "--capability", "write", token=alice,
        )  # fmt: skip
        listed = httpx.get(
            f"{server.url}/v1/adapters/{pushed['id']}/signatures",
            headers={"Authorization": f"Bearer {alice}"},
        ).json()
        assert listed == {"adapter_id": pushed["id"], "strict": False, "items": []}


def test_approvers_sign_channel_revisions_and_the_registry_signs_timestamps(
    weact: Weact, strict: InProcessRegistry, tmp_path: Path
) -> None:
    from registry.trust import TrustRoot
    from registry.trust.channel import check_timestamp, verify_revision_metadata, verify_timestamp

    admin, alice, bob = (
        token(strict, "root", "admin"),
        token(strict, "alice", "publisher"),
        token(strict, "bob", "approver"),
    )
    factories.write_backbone(tmp_path / "backbone")
    weact.ok("backbone", "register", tmp_path / "backbone", "--name", "tiny", token=admin)
    weact.ok("capability", "create", "write", "--description", "w", token=admin)
    adapter = factories.write_adapter(tmp_path / "write", seed=5)
    pushed = weact.ok(
        "adapter", "push", adapter, "--capability", "write", "--key", "keys/pub.key", token=alice
    )
    weact.ok("adapter", "approve", str(pushed["id"]), "--key", "keys/ap1.key", token=bob)
    promote = ("channel", "promote", "prod", "--adapter", f"write=#{pushed['id']}", "--create")
    revision = weact.ok(*promote, "--key", "keys/ap1.key", token=bob)["revision"]
    sign = ("channel", "sign", "prod", "--revision", "1")
    assert weact.ok(*sign, "--key", "keys/ap2.key", token=bob)["revision"] == 1
    assert "already has a signature" in weact.fails(*sign, "--key", "keys/ap2.key", token=bob)
    assert "not a valid one by an approver" in weact.fails(
        *sign, "--key", "keys/stranger.key", token=bob
    )
    assert "has no revision 7" in weact.fails(
        "channel", "sign", "prod", "--revision", "7", "--key", "keys/ap2.key", token=bob
    )

    headers = {"Authorization": f"Bearer {bob}"}
    metadata = httpx.get(
        f"{strict.url}/v1/channels/prod/revisions/1/metadata", headers=headers
    ).json()
    root = TrustRoot.load(weact.cwd / "root.json")
    assert len(verify_revision_metadata(root, revision, metadata)) == 2

    # the admins name the registry's timestamp key (made by `weact serve`) in the root
    stamp_key = weact.cwd / "serve" / ".weact" / "timestamp.pub.json"
    weact.ok("root", "add-key", "root.json", "timestamp", stamp_key)
    for admin_key in ("keys/admin1.key", "keys/admin2.key"):
        weact.run("root", "sign", "root.json", "--key", admin_key)
    shown = weact.ok("root", "show", "root.json")
    assert shown["version"] == 2
    assert len(shown["roles"]["timestamp"]["keyids"]) == 1
    stamp = httpx.get(f"{strict.url}/v1/channels/prod/timestamp", headers=headers).json()
    check_timestamp(
        verify_timestamp(TrustRoot.load(weact.cwd / "root.json"), "prod", stamp), revision
    )
