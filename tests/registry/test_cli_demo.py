"""`weact demo` runs every step against a real `weact serve` subprocess.

The weights are the stdlib-built ones (`--plain`), so this test needs no torch; the torch +
peft path is covered by `make demo` and by test_cli_e2e.py's PEFT test.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cli.demo import STEPS, build_plain_weights, run_demo, write_safetensors


def test_the_demo_runs_every_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    demo = run_demo(tmp_path, plain_weights=True)

    printed = capsys.readouterr().out
    for number, step in enumerate(STEPS, 1):
        assert f"[{number}/{len(STEPS)}] {step.title}" in printed
    assert "refused (forbidden" in printed
    assert [rev["revision"] for rev in demo.revisions] == [1, 2, 3]
    first, update, rollback = demo.revisions
    assert rollback["library_digest"] == first["library_digest"]
    assert update["library"]["write"]["adapter_id"] == demo.adapters["write++"]["id"]
    assert update["library"]["plan"] == first["library"]["plan"]
    assert demo.adapters["write++"]["parent_id"] == demo.adapters["write"]["id"]
    assert demo.registry is not None
    assert demo.registry.process.poll() is not None  # the server was stopped
    assert (tmp_path / ".weact" / "registry.db").is_file()  # serve's embedded defaults
    assert any((tmp_path / ".weact" / "blobs").rglob("*"))


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
    assert "byte-identical to the push: True" in done.stdout
    assert "demo done" in done.stdout
    assert list(tmp_path.iterdir()) == []  # the demo cleans up after itself
