"""Audit: roots recomputed from resident memory equal the files' manifests; tampering shows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from runtime.audit import manifest_of_resident
from runtime.engine import AdapterSpec
from runtime.engines.peft import WEIGHTS_FILE, PeftEngine
from runtime.errors import AuditMismatchError
from storage.manifest import manifest_of_file, manifest_of_path


@pytest.fixture
def engine(tiny_backbone: Path, tiny_adapters: dict[str, Path]) -> PeftEngine:
    specs = [AdapterSpec(name, str(path)) for name, path in tiny_adapters.items()]
    return PeftEngine(tiny_backbone, specs)


def test_resident_roots_equal_file_manifests(engine: PeftEngine, tiny_backbone, tiny_adapters):
    report = engine.audit()
    assert report.ok
    assert report.detail == ""
    assert report.backbone_root == manifest_of_path(tiny_backbone).root
    for name, path in tiny_adapters.items():
        assert report.adapters[name] == manifest_of_file(path / WEIGHTS_FILE).root


def test_backbone_root_equals_weact_manifest(engine: PeftEngine, tiny_backbone: Path) -> None:
    weact = Path(sys.executable).with_name("weact")
    out = subprocess.run(
        [str(weact), "manifest", "--json", str(tiny_backbone)],
        check=True,
        capture_output=True,
        text=True,
    )
    assert engine.audit().backbone_root == json.loads(out.stdout)["root"]


@pytest.mark.parametrize("target", ["backbone", "adapter"])
def test_tampering_with_one_resident_weight_is_seen(engine: PeftEngine, target: str) -> None:
    if target == "backbone":
        tensor = engine.model.model.layers[1].mlp.down_proj.weight
    else:
        tensor = next(iter(engine._loaded["search"].tensors.values()))
    with torch.no_grad():
        tensor.view(-1)[7] += 1e-3  # in place: the one weight the forward pass reads
    report = engine.audit()
    assert not report.ok
    assert ("backbone" if target == "backbone" else "adapter 'search'") in report.detail


def test_expected_roots_from_the_registry_are_checked(tiny_backbone, tiny_adapters) -> None:
    spec = AdapterSpec("plan", str(tiny_adapters["plan"]))
    engine = PeftEngine(tiny_backbone, [spec], backbone_root="f" * 64)
    report = engine.audit()
    assert not report.ok
    assert "backbone" in report.detail
    assert "plan" not in report.detail


def test_resident_manifest_casts_nothing_and_keeps_names() -> None:
    t = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)
    manifest = manifest_of_resident({"x.weight": t, "y": torch.ones((), dtype=torch.int64)})
    entries = manifest.by_name()
    assert entries["x.weight"].dtype == "BF16"
    assert entries["x.weight"].shape == (2, 3)
    assert entries["y"].shape == ()
    assert entries["y"].dtype == "I64"
    with pytest.raises(AuditMismatchError, match="no safetensors dtype"):
        manifest_of_resident({"c": torch.zeros(2, dtype=torch.complex64)})
