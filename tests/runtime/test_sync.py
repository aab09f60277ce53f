"""runtime.sync against the registry over real HTTP (served from a thread of the test
process: `registry_server`), with tiny adapters in PeftEngine."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("peft")

from support.serving import InProcessRegistry  # noqa: E402

from clikit.progress import steps  # noqa: E402
from registry import errors  # noqa: E402
from registry.client import RegistryClient  # noqa: E402
from runtime.engine import AdapterSpec  # noqa: E402
from runtime.errors import AdapterLoadError  # noqa: E402
from runtime.sync import heartbeat, pull_library  # noqa: E402
from storage.local import LocalBlobStore  # noqa: E402
from storage.manifest import manifest_of_path  # noqa: E402

DESCRIPTIONS = {"plan": "Plan the steps.", "search": "Search the KB.", "write": "Write it up."}


@dataclass
class Registry:
    server: InProcessRegistry
    admin: RegistryClient
    alice: RegistryClient
    bob: RegistryClient
    node: RegistryClient
    backbone_root: str
    adapters: dict[str, int]

    def promote(self, channel: str, adapters: dict[str, int]) -> int:
        result = self.bob.promote(
            channel, adapters, backbone=self.backbone_root, order=list(DESCRIPTIONS), create=True
        )
        return int(result["revision"]["revision"])

    def publish(self, directory: Path, capability: str, seed: int) -> int:
        pushed = self.alice.push_adapter(
            directory, capability=capability, backbone=self.backbone_root, provenance={"seed": seed}
        )
        return int(self.bob.approve(pushed["id"])["id"])


@pytest.fixture(scope="module")
def registry(
    registry_server: InProcessRegistry, tiny_backbone: Path, tiny_adapters: dict[str, Path]
) -> Iterator[Registry]:
    server = registry_server
    admin = RegistryClient(server.url, server.bootstrap_token("r", "admin"))
    clients = {
        role: RegistryClient(server.url, admin.create_token(name=name, role=role)["token"])
        for name, role in (("alice", "publisher"), ("bob", "approver"), ("node-1", "node"))
    }
    manifest = manifest_of_path(tiny_backbone).to_json()
    root = admin.register_backbone(name="tiny", manifest=manifest)["root"]
    for order, (name, description) in enumerate(DESCRIPTIONS.items()):
        admin.create_capability(name=name, description=description, order=order)
    reg = Registry(
        server, admin, clients["publisher"], clients["approver"], clients["node"], root, {}
    )
    for seed, (capability, path) in enumerate(tiny_adapters.items(), 1):
        reg.adapters[capability] = reg.publish(path, capability, seed)
    reg.promote("prod", reg.adapters)
    yield reg
    for client in (admin, *clients.values()):
        client.close()


def _engine(backbone: Path, specs: list[AdapterSpec]):  # -> PeftEngine
    from runtime.engines.peft import PeftEngine

    return PeftEngine(backbone, specs)


def test_pulled_library_loads_and_audits_to_the_registry_roots(
    registry: Registry, tiny_backbone: Path, tmp_path: Path
) -> None:
    revision, specs = pull_library(registry.node, "prod", tmp_path)

    entries = revision["library"]
    assert [s.name for s in specs] == ["plan", "search", "write"]
    for spec in specs:
        entry = entries[spec.name]
        assert spec.version == entry["name"]
        assert spec.manifest_root == entry["manifest_root"]
        assert spec.description == DESCRIPTIONS[spec.name]
        assert Path(spec.path) == tmp_path / entry["name"]
    engine = _engine(tiny_backbone, specs)
    report = engine.audit()
    assert report.ok, report.detail
    assert dict(report.adapters) == {c: e["manifest_root"] for c, e in entries.items()}
    assert report.backbone_root == registry.backbone_root == revision["backbone"]

    node = heartbeat(registry.node, "node-1", "prod", revision["revision"], report)
    assert (node["revision"], node["audit_ok"]) == (revision["revision"], True)
    listed = {n["id"]: n for n in registry.admin.list_nodes()}["node-1"]
    assert listed["audit"]["adapters"] == dict(report.adapters)


def test_the_install_shows_a_step_per_adapter_on_stderr(
    registry: Registry,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With the CLI's renderer (`clikit.progress.steps`, forced by `WEACT_PROGRESS=1`:
    stderr is no terminal here), each adapter is a step on stderr, nothing on stdout;
    `WEACT_PROGRESS=0` is silent, and so is the library without a renderer."""
    monkeypatch.setenv("WEACT_PROGRESS", "1")
    revision, specs = pull_library(registry.node, "prod", tmp_path, steps=steps)
    out, err = capsys.readouterr()
    assert out == ""
    label = f"install prod revision {revision['revision']}"
    *lines, done = err.splitlines()
    untimed = [re.sub(r" \([^()]*\)$", "", line) for line in lines]  # elapsed, ETA
    assert untimed == [f"{label}: step {i}/3 {s.name}: {s.version}" for i, s in enumerate(specs, 1)]
    assert re.fullmatch(rf"{label}: done in \d+\.\d s", done)
    assert pull_library(registry.node, "prod", tmp_path)[1] == specs  # no renderer
    assert capsys.readouterr() == ("", "")
    monkeypatch.setenv("WEACT_PROGRESS", "0")
    assert pull_library(registry.node, "prod", tmp_path, steps=steps)[1] == specs
    assert capsys.readouterr() == ("", "")


def test_a_verified_copy_is_kept_and_a_tampered_one_pulled_again(
    registry: Registry, tmp_path: Path
) -> None:
    _, specs = pull_library(registry.node, "prod", tmp_path)
    plan, write = (Path(s.path) / "adapter_model.safetensors" for s in (specs[0], specs[2]))
    inode = plan.stat().st_ino
    good = write.read_bytes()
    write.write_bytes(good[:-1] + bytes([good[-1] ^ 0xFF]))

    _, again = pull_library(registry.node, "prod", tmp_path)

    assert again == specs
    assert plan.stat().st_ino == inode  # verified: not downloaded again
    assert write.read_bytes() == good  # tampered: replaced by the registry's bytes
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(s.version for s in specs)


def test_a_tampered_blob_is_refused_and_the_node_keeps_its_library(
    registry: Registry,
    tiny_backbone: Path,
    tmp_path: Path,
) -> None:
    from runtime.tiny import build_tiny_adapter

    registry.promote("canary", registry.adapters)
    revision, specs = pull_library(registry.node, "canary", tmp_path / "node")
    engine = _engine(tiny_backbone, specs)
    before = engine.audit()
    new_write = build_tiny_adapter(tiny_backbone, tmp_path / "write-new", seed=42)
    new_id = registry.publish(new_write, "write", 42)
    registry.promote("canary", {"write": new_id})
    blob = registry.node.get_adapter(new_id)["files"]["adapter_model.safetensors"]
    stored = LocalBlobStore(registry.server.store_url).path_of(blob)
    data = stored.read_bytes()
    stored.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))

    # the server answers a corrupted blob digest_mismatch (DigestMismatchError); a full body
    # with wrong bytes is checked by the client (DigestMismatchError)
    with pytest.raises((errors.DigestMismatchError, errors.TransferError)):
        pull_library(registry.node, "canary", tmp_path / "node")

    new_name = registry.node.get_adapter(new_id)["name"]
    assert not any(p.name.startswith(new_name) for p in (tmp_path / "node").iterdir())
    assert dict(engine.adapters) == {s.name: s for s in specs}  # nothing swapped
    assert engine.audit() == before
    assert before.ok
    assert dict(before.adapters)["write"] == revision["library"]["write"]["manifest_root"]


def test_the_engine_refuses_local_weights_whose_root_differs(
    registry: Registry, tiny_backbone: Path, tmp_path: Path
) -> None:
    _, specs = pull_library(registry.node, "prod", tmp_path)
    weights = Path(specs[2].path) / "adapter_model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[:-1] + bytes([data[-1] ^ 0x01]))

    with pytest.raises(AdapterLoadError, match="manifest root .* != expected"):
        _engine(tiny_backbone, specs)


@pytest.fixture
def hashed_files(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The installed files a pull hashes again (a download is hashed while it streams)."""
    import runtime.verified

    names: list[str] = []
    real = runtime.verified.sha256_of_file

    def counting(path: Path) -> str:
        digest = real(path)
        names.append(Path(path).name)
        return digest

    monkeypatch.setattr(runtime.verified, "sha256_of_file", counting)
    return names


def test_each_file_is_hashed_once_and_an_installed_one_not_again(
    registry: Registry, tmp_path: Path, hashed_files: list[str]
) -> None:
    _, specs = pull_library(registry.node, "prod", tmp_path)
    assert hashed_files == []  # verified while it streamed in: not re-read
    inodes = [(Path(s.path) / "adapter_model.safetensors").stat().st_ino for s in specs]

    assert pull_library(registry.node, "prod", tmp_path)[1] == specs  # the next revision
    assert hashed_files == []  # the record vouches for files unchanged since
    assert inodes == [(Path(s.path) / "adapter_model.safetensors").stat().st_ino for s in specs]


def test_a_tampered_file_with_its_mtime_put_back_is_still_caught(
    registry: Registry, tmp_path: Path, hashed_files: list[str]
) -> None:
    """Writing moves the ctime, which `utime` cannot put back: the file is hashed again,
    found wrong and pulled again."""
    import os

    _, specs = pull_library(registry.node, "prod", tmp_path)
    weights = Path(specs[1].path) / "adapter_model.safetensors"
    good, before = weights.read_bytes(), weights.stat()
    weights.write_bytes(good[:-1] + bytes([good[-1] ^ 0x01]))
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (weights.stat().st_size, weights.stat().st_mtime_ns) == (
        before.st_size,
        before.st_mtime_ns,
    )

    assert pull_library(registry.node, "prod", tmp_path)[1] == specs

    assert hashed_files == ["adapter_model.safetensors"]  # only the changed file is read
    assert weights.read_bytes() == good
    hashed_files.clear()
    pull_library(registry.node, "prod", tmp_path)
    assert hashed_files == []  # the pulled copy is recorded again


def test_the_record_is_newer_than_the_files_it_vouches_for(
    registry: Registry, tmp_path: Path
) -> None:
    """A change in the clock tick of the write would keep the ctime: the record waits for
    its own mtime to pass the files' ctimes, so any later change is one the record sees."""
    from runtime.verified import RECORD_FILE

    _, specs = pull_library(registry.node, "prod", tmp_path)
    for spec in specs:
        directory = Path(spec.path)
        record = (directory / RECORD_FILE).stat().st_mtime_ns
        files = [directory / "adapter_config.json", directory / "adapter_model.safetensors"]
        assert all(f.stat().st_ctime_ns < record for f in files)


def test_a_resident_adapter_is_not_read_again_and_a_new_one_is_hashed_once(
    registry: Registry, tiny_backbone: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading hashes the tensors it loaded (the root compared with the registry's); a
    version already resident is kept from memory, which the audit hashes."""
    import runtime.engines.peft.adapters as adapters
    import storage.manifest

    _, specs = pull_library(registry.node, "prod", tmp_path)
    engine = _engine(tiny_backbone, specs[:2])
    loads: list[int] = []
    files: list[object] = []
    real = adapters.manifest_of_resident
    monkeypatch.setattr(adapters, "manifest_of_resident", lambda t: loads.append(1) or real(t))
    real_files = storage.manifest.hash_files
    monkeypatch.setattr(
        storage.manifest, "hash_files", lambda *a, **k: files.append(a) or real_files(*a, **k)
    )

    engine.set_library(specs)

    assert (len(loads), files) == (1, [])  # write loaded and hashed once; plan, search not
    monkeypatch.undo()
    report = engine.audit()
    assert report.ok, report.detail
