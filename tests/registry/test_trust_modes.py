"""The registry's trust modes (issue 28): development by default, strict when asked, and the
move from one to the other, over real HTTP on SQLite and PostgreSQL.

- no `--root`: the first start makes development keys and a permissive root under
  `.weact/trust`, says so in one log line, serves the root (`GET /v1/trust`,
  `/v1/trust/root?version=N`) and shows the mode on the overview; a restart reuses them;
- `WEACT_STRICT=1` alone: strict against that development root (its signer key signs);
- `WEACT_STRICT=1 WEACT_TRUST_ROOT=root.json`: an offline root replaces the development one,
  whose keys stop counting; a root that does not follow the stored one stops `weact serve`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import factories
import httpx
import pytest

from registry.client import RegistryClient
from registry.errors import UntrustedError
from registry.launcher import EmbeddedRegistry, embedded_registry
from registry.trust import TrustRoot, create_key, load_public_key, load_signer

WEACT = Path(sys.executable).with_name("weact")


@contextmanager
def serving(
    workdir: Path, database_url: str, monkeypatch: pytest.MonkeyPatch, **env: str
) -> Iterator[tuple[EmbeddedRegistry, RegistryClient, str]]:
    """`weact serve` in `workdir` with these WEACT_* settings (and none other of trust): the
    server, an admin client and its token."""
    for name in ("WEACT_STRICT", "WEACT_TRUST_ROOT", "WEACT_TRUST_DIR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with embedded_registry(workdir, database_url) as server:
        token = server.bootstrap_token("admin", "admin")
        with RegistryClient(server.url, token) as admin:
            yield server, admin, token


def overview(server: EmbeddedRegistry, token: str) -> str:
    page = httpx.get(f"{server.url}/", headers={"Authorization": f"Bearer {token}"})
    assert page.status_code == 200
    return " ".join(re.sub(r"<[^>]+>", " ", page.text).split())


def offline_root(keys: Path) -> TrustRoot:
    for name in ("admin", "publisher"):
        create_key(keys, name)
    root = TrustRoot.create([load_public_key(keys / "admin.pub.json")], threshold=1)
    root.add_key("publish:*", load_public_key(keys / "publisher.pub.json"))
    root.sign(load_signer(keys / "admin.key"))
    return root


def test_from_development_to_strict(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workdir, trust = tmp_path / "serve", tmp_path / "serve" / ".weact" / "trust"
    workdir.mkdir()
    factories.write_backbone(tmp_path / "backbone")
    adapters = [factories.write_adapter(tmp_path / f"a{seed}", seed=seed) for seed in range(5)]

    with serving(workdir, database_url, monkeypatch) as (server, admin, token):
        lines = [x for x in server.log.read_text().splitlines() if "registry.trust" in x]
        assert len(lines) == 1, lines
        assert "development trust: generated development keys" in lines[0]
        assert "unsigned pushes and approvals are accepted" in lines[0]
        assert sorted(p.name for p in trust.iterdir()) == [
            "dev-admin.key", "dev-admin.pub.json", "dev-signer.key", "dev-signer.pub.json",
            "root.json",
        ]  # fmt: skip
        assert oct((trust / "dev-signer.key").stat().st_mode & 0o777) == "0o600"
        status = admin.get_trust()
        assert (status["mode"], status["strict"], status["versions"]) == ("development", False, [1])
        assert status["root"]["development"] is True
        served = TrustRoot.from_bytes(json.dumps(admin.get_trust_root(1)).encode())
        served.verify()
        assert served.metadata.to_dict() == TrustRoot.load(trust / "root.json").metadata.to_dict()
        with pytest.raises(LookupError, match="no root version 2"):
            admin.get_trust_root(2)
        assert "development unsigned accepted · root v1 (generated here)" in overview(server, token)
        admin.register_backbone(name="tiny", manifest=_manifest(tmp_path / "backbone"))
        admin.create_capability(name="write", description="w")
        alice = admin.create_token(name="alice", role="publisher")["token"]
        with RegistryClient(server.url, alice) as pub:
            pub.push_adapter(adapters[0], capability="write")  # unsigned: accepted
        done = _weact("root", "status", url=server.url, token=token)
        assert done.stdout.strip() == (
            f"development: development root (keys on the registry's host) version 1, "
            f"expires {status['root']['expires']}"
        )
    keyids = {p.name: load_public_key(p).keyid for p in trust.glob("*.pub.json")}

    # strict, still on the development root: its signer key signs
    with serving(workdir, database_url, monkeypatch, WEACT_STRICT="1") as (server, admin, token):
        assert "strict trust: uses development keys" in server.log.read_text()
        assert {p.name: load_public_key(p).keyid for p in trust.glob("*.pub.json")} == keyids
        assert admin.get_trust()["mode"] == "strict"
        assert "strict signed pushes and approvals only · root v1 (generated here)" in overview(
            server, token
        )
        with RegistryClient(server.url, alice) as pub:
            with pytest.raises(UntrustedError, match="this registry is strict"):
                pub.push_adapter(adapters[1], capability="write")
            pub.push_adapter(
                adapters[1], capability="write", signer=load_signer(trust / "dev-signer.key")
            )

    # strict on an offline root: it replaces the development chain, whose keys stop counting
    offline = offline_root(tmp_path / "keys")
    offline.save(tmp_path / "root.json")
    env = {"WEACT_STRICT": "1", "WEACT_TRUST_ROOT": str(tmp_path / "root.json")}
    with serving(workdir, database_url, monkeypatch, **env) as (server, admin, token):
        assert "strict trust: root version 1;" in server.log.read_text()
        status = admin.get_trust()
        assert (status["versions"], status["root"]["development"]) == ([1], False)
        assert admin.get_trust_root(1) == offline.metadata.to_dict()
        text = overview(server, token)
        assert "strict signed pushes and approvals only · root v1" in text
        assert "generated here" not in text
        with RegistryClient(server.url, alice) as pub:
            with pytest.raises(UntrustedError, match="0 of 1 publish signature"):
                pub.push_adapter(
                    adapters[2], capability="write", signer=load_signer(trust / "dev-signer.key")
                )
            publisher = load_signer(tmp_path / "keys" / "publisher.key")
            pub.push_adapter(adapters[2], capability="write", signer=publisher)

    # another root that does not follow the stored one: weact serve refuses to start
    other = offline_root(tmp_path / "other")
    other.save(tmp_path / "other.json")
    env["WEACT_TRUST_ROOT"] = str(tmp_path / "other.json")
    with pytest.raises(RuntimeError, match="does not follow the registry's root version 1"):
        with serving(workdir, database_url, monkeypatch, **env):
            pass


def _manifest(backbone: Path) -> dict:
    from storage.manifest import manifest_of_path

    return manifest_of_path(backbone).to_json()


def _weact(*args: str, url: str, token: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WEACT_URL": url, "WEACT_TOKEN": token}
    done = subprocess.run([str(WEACT), *args], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done
