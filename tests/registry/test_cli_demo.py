"""`weact demo` runs every step against a real `weact serve` subprocess.

The full demo (registry lifecycle, training `code`, publishing, a runtime node on PeftEngine,
one episode, the audit chain) runs in-process on the tiny torch model; the `--plain` steps run
on the stdlib-built weights, without torch. `make demo` runs the same as a subprocess.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cli.demo.command import PLAIN_STEPS, STEPS, run_demo
from cli.demo.harness import Demo, Step
from cli.demo.weights import build_plain_weights, write_safetensors


def _printed_every(steps: list[Step], printed: str) -> None:
    for number, step in enumerate(steps, 1):
        assert f"[{number}/{len(steps)}] {step.title}" in printed


def _check_registry_lifecycle(demo: Demo, tmp_path: Path, printed: str) -> None:
    assert "refused (forbidden" in printed
    first, update, rollback = demo.revisions[:3]
    assert [rev["revision"] for rev in demo.revisions[:3]] == [1, 2, 3]
    assert rollback["library_digest"] == first["library_digest"]
    assert update["library"]["write"]["adapter_id"] == demo.adapters["write++"]["id"]
    assert update["library"]["plan"] == first["library"]["plan"]
    assert demo.adapters["write++"]["parent_id"] == demo.adapters["write"]["id"]
    assert "byte-identical to the push: True" in printed
    assert "hash chain intact" in printed
    assert demo.registry is not None
    assert demo.registry.process.poll() is not None  # the server was stopped
    assert (tmp_path / ".weact" / "registry.db").is_file()  # serve's embedded defaults
    assert any((tmp_path / ".weact" / "blobs").rglob("*"))


def test_the_plain_demo_runs_the_registry_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = run_demo(tmp_path, plain_weights=True)

    printed = capsys.readouterr().out
    _printed_every(PLAIN_STEPS, printed)
    _check_registry_lifecycle(demo, tmp_path, printed)
    assert len(demo.revisions) == 3
    assert demo.node is None
    assert demo.training is None


def test_the_demo_runs_every_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("peft")
    demo = run_demo(tmp_path)

    printed = capsys.readouterr().out
    _printed_every(STEPS, printed)
    _check_registry_lifecycle(demo, tmp_path, printed)
    training, node = demo.training, demo.node
    assert training is not None
    assert node is not None
    assert training.nll_after < training.nll_before
    code = demo.adapters["code"]
    assert (code["state"], code["provenance"]["replay"]) == ("approved", False)
    assert code["provenance"]["capabilities"] == ["code"]
    prod = demo.revisions[-1]
    assert (prod["revision"], prod["library"]["code"]["adapter_id"]) == (4, code["id"])
    assert node.revision == prod
    assert [s.version for s in node.specs] == ["plan@1", "search@1", "write@1", "code@1"]
    report = node.engine.audit()
    assert dict(report.adapters) == {c: e["manifest_root"] for c, e in prod["library"].items()}
    assert report.backbone_root == demo.backbone_root
    assert "audit_ok True" in printed
    episode = node.episode
    assert episode.status == "done", episode.error
    decoded = [s.active for s in episode.steps if s.decoded and s.active]
    assert list(dict.fromkeys(decoded)) == ["plan", "search", "write"]
    assert all(f"{s.step:>4}  {s.active or '-':<7}" in printed for s in episode.steps)


def test_plain_weights_are_valid_distinct_safetensors(tmp_path: Path) -> None:
    from storage.manifest import manifest_of_path

    weights = build_plain_weights(tmp_path)
    backbone = manifest_of_path(weights.backbone)
    assert len(backbone) == 11
    roots = {
        manifest_of_path(path / "adapter_model.safetensors").root
        for path in weights.adapters.values()
    }
    assert len(roots) == len(weights.adapters)
    again = build_plain_weights(tmp_path / "again")
    assert manifest_of_path(again.backbone).root == backbone.root  # deterministic


def test_write_safetensors_matches_the_reference_reader(tmp_path: Path) -> None:
    import array

    np = pytest.importorskip("numpy")
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    values = array.array("f", [0.5, -1.25, 3.0, 0.0, 2.0, -0.125])
    write_safetensors(tmp_path / "t.safetensors", {"b": ((2, 3), values), "a": ((6,), values)})
    loaded = safetensors_numpy.load_file(str(tmp_path / "t.safetensors"))
    assert loaded["b"].shape == (2, 3)
    assert np.array_equal(loaded["a"], np.array(values, dtype=np.float32))


@pytest.mark.slow
def test_weact_demo_runs_with_torch_weights(tmp_path: Path) -> None:
    pytest.importorskip("peft")
    done = subprocess.run(
        [str(Path(sys.executable).with_name("weact")), "demo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "llama + peft (torch)" in done.stdout
    assert f"[{len(STEPS)}/{len(STEPS)}] Verify the audit event chain" in done.stdout
    assert "hash chain intact" in done.stdout
    assert "demo done" in done.stdout
    assert "INFO" not in done.stdout + done.stderr
    assert list(tmp_path.iterdir()) == []  # the demo cleans up after itself
