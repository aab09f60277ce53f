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
from runtime.errors import AdapterLoadError, UnknownAdapterError
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


def test_swap_serves_new_sessions_and_keeps_open_ones(engine: PeftEngine, broken) -> None:
    ids = engine.tokenizer.encode("Step 1: find sources.")
    new_dir = broken("plan2", tensors=lambda w: w.update({Q_A: w[Q_A] * 2}))

    def on_plan(session):
        session.append(ids)
        session.activate("plan")
        return session

    old_session = on_plan(engine.new_session())
    engine.swap_adapters([AdapterSpec("plan", str(new_dir), version="plan@2")])
    assert engine.adapters["plan"].version == "plan@2"
    new_session = on_plan(engine.new_session())
    old, new = old_session.next_logits(), new_session.next_logits()
    torch.testing.assert_close(old, _logits(engine, "plan", ids))  # the weights it started on
    torch.testing.assert_close(new, _logits(engine, "plan@2", ids))
    assert (old - new).abs().max() > 1e-2
    assert engine.release_unused() == []  # the open episode still pins the old version
    old_session.close()
    assert engine.release_unused() == ["plan"]
    report = engine.audit()
    assert report.ok
    assert report.adapters["plan"] == manifest_of_file(new_dir / WEIGHTS_FILE).root
    assert set(report.adapters) == {"plan"}


def test_set_library_offers_exactly_the_new_library(
    tiny_backbone: Path, tiny_adapters: dict[str, Path], broken
) -> None:
    """A capability left out (a revoke, a rollback) is unavailable to new sessions at once,
    stays with the open ones, and is freed when they close; a bad library changes nothing."""
    specs = [AdapterSpec(n, str(p), version=f"{n}@1") for n, p in tiny_adapters.items()]
    engine = PeftEngine(tiny_backbone, specs)
    old_session = engine.new_session()
    old_session.activate("write")
    plan2 = broken("plan2", tensors=lambda w: w.update({Q_A: w[Q_A] * 2}))
    bad = broken("bad", config=lambda c: c.update({"r": 3}))
    before = dict(engine.adapters)
    with pytest.raises(AdapterLoadError):
        engine.set_library([AdapterSpec("plan", str(bad), version="plan@3")])
    assert dict(engine.adapters) == before

    engine.set_library([AdapterSpec("plan", str(plan2), version="plan@2"), specs[1]])
    assert sorted(engine.adapters) == ["plan", "search"]
    assert engine.adapters["plan"].version == "plan@2"
    with pytest.raises(UnknownAdapterError, match="'write' is unavailable"):
        engine.new_session().activate("write")
    assert old_session.library["write"] == "write@1"  # the open session keeps its library
    assert engine.release_unused() == []
    assert set(engine.audit().adapters) == {"plan", "search", "plan@1", "write@1"}
    old_session.close()
    assert engine.release_unused() == ["plan@1", "write@1"]
    report = engine.audit()
    assert report.ok
    assert set(report.adapters) == {"plan", "search"}
    assert report.adapters["plan"] == manifest_of_file(plan2 / WEIGHTS_FILE).root


def test_a_version_name_never_names_other_weights(engine: PeftEngine, broken) -> None:
    first = broken("v1")
    other = broken("v2", tensors=lambda w: w.update({Q_A: w[Q_A] + 1}))
    engine.add_adapters([AdapterSpec("write", str(first), version="write@1")])
    with pytest.raises(AdapterLoadError, match="new version name"):
        engine.swap_adapters([AdapterSpec("write", str(other), version="write@1")])
    engine.swap_adapters([AdapterSpec("write", str(first), version="write@1")])  # same: no-op
    assert engine.adapters["write"].path == str(first)


def _logits(engine: PeftEngine, key: str, ids: list[int]) -> torch.Tensor:
    engine.holder.name = key
    with torch.inference_mode():
        return engine.model(input_ids=torch.tensor([ids])).logits[0, -1]
