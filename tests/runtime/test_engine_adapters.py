"""Adapter loading: every problem of a batch reported at once, nothing applied on failure."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from runtime.engine import AdapterSpec
from runtime.engines.peft import CONFIG_FILE, WEIGHTS_FILE, PeftEngine
from runtime.errors import AdapterLoadError
from storage.manifest import manifest_of_file

Q_A = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"


@pytest.fixture
def engine(tiny_backbone: Path, tiny_adapters: dict[str, Path]) -> PeftEngine:
    return PeftEngine(tiny_backbone, [AdapterSpec("plan", str(tiny_adapters["plan"]))])


@pytest.fixture
def broken(tmp_path: Path, tiny_adapters: dict[str, Path]) -> Callable[..., Path]:
    """Copy the `write` adapter and damage its tensors and/or config."""

    def make(name: str, tensors=None, config=None) -> Path:
        path = tmp_path / name
        shutil.copytree(tiny_adapters["write"], path)
        if tensors is not None:
            weights = load_file(path / WEIGHTS_FILE)
            tensors(weights)
            save_file(weights, path / WEIGHTS_FILE)
        if config is not None:
            cfg = json.loads((path / CONFIG_FILE).read_text())
            config(cfg)
            (path / CONFIG_FILE).write_text(json.dumps(cfg))
        return path

    return make


def test_all_problems_in_one_error_and_nothing_applied(engine: PeftEngine, broken) -> None:
    def bad_shape(w):
        w[Q_A] = torch.zeros(3, w[Q_A].shape[1])

    def bad_module(w):
        for key in (Q_A, Q_A.replace("lora_A", "lora_B")):
            w[key.replace("q_proj", "nope_proj")] = w.pop(key)

    def extra(w):
        w["base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector"] = torch.ones(4)

    specs = [
        AdapterSpec("a", str(broken("a", tensors=bad_shape))),
        AdapterSpec("b", str(broken("b", tensors=bad_module))),
        AdapterSpec("c", str(broken("c", tensors=extra))),
        AdapterSpec("d", str(broken("d", config=lambda c: c.update(use_dora=True, r=0)))),
        AdapterSpec("e", "/nonexistent/adapter"),
        AdapterSpec("plan", str(broken("f"))),
    ]
    with pytest.raises(AdapterLoadError) as info:
        engine.add_adapters(specs)
    message = str(info.value)
    for needle in (
        "'a'",
        "do not fit",
        "nope_proj: no nn.Linear",
        "lora_magnitude_vector",
        "use_dora=True is not supported",
        "r must be a positive integer",
        "'e'",
        "'plan' is used twice",
    ):
        assert needle in message
    assert list(engine.adapters) == ["plan"]


def test_a_good_adapter_with_a_bad_one_is_not_applied(engine: PeftEngine, broken) -> None:
    good = AdapterSpec("write", str(broken("good")))
    bad = AdapterSpec("code", str(broken("bad", tensors=lambda w: w.pop(Q_A))))
    with pytest.raises(AdapterLoadError, match="lora_A and lora_B must both be present"):
        engine.add_adapters([good, bad])
    assert list(engine.adapters) == ["plan"]
    engine.add_adapters([good])
    assert list(engine.adapters) == ["plan", "write"]


def test_manifest_root_is_checked_at_load(engine: PeftEngine, broken) -> None:
    path = broken("w")
    root = manifest_of_file(path / WEIGHTS_FILE).root
    with pytest.raises(AdapterLoadError, match="manifest root"):
        engine.add_adapters([AdapterSpec("write", str(path), manifest_root="0" * 64)])
    engine.add_adapters([AdapterSpec("write", str(path), version="write@1", manifest_root=root)])
    assert engine.adapters["write"].version == "write@1"


def test_rslora_and_patterns_match_peft(tiny_backbone: Path, broken) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    path = broken("rs", config=lambda c: c.update(use_rslora=True, alpha_pattern={"v_proj": 2}))
    engine = PeftEngine(tiny_backbone, [AdapterSpec("rs", str(path))])
    base = AutoModelForCausalLM.from_pretrained(tiny_backbone).eval()
    ref = PeftModel.from_pretrained(base, path).eval()
    ids = torch.tensor([engine.tokenizer.encode("Step 1: find sources.")])
    engine.holder.name = "rs"
    with torch.inference_mode():
        torch.testing.assert_close(engine.model(ids).logits, ref(ids).logits, atol=1e-5, rtol=0)
