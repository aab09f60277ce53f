"""check_adapter: A/B pairs, the fit against backbone shapes, every problem at once."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.errors import AdapterFormatError
from storage.lora import (
    backbone_shapes,
    check_adapter,
    lora_key,
    split_key,
)
from storage.lora.config import MAX_KEY_SHAPES, MAX_VARIABLE_PATTERNS
from storage.manifest import TensorEntry

DIGEST = "0" * 64
LEAVES = ("q_proj", "k_proj", "v_proj", "o_proj")
HIDDEN = 16


def backbone(layers: int = 2, leaves: tuple[str, ...] = LEAVES) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (50, HIDDEN)}
    for i in range(layers):
        for j, leaf in enumerate(leaves):
            shapes[f"model.layers.{i}.self_attn.{leaf}.weight"] = (HIDDEN + j, HIDDEN)
        shapes[f"model.layers.{i}.input_layernorm.weight"] = (HIDDEN,)
    return shapes


def tensors(
    shapes: dict[str, tuple[int, ...]], ranks: dict[str, int] | int = 4, dtype: str = "F32"
) -> list[TensorEntry]:
    out = []
    for name, shape in shapes.items():
        module = name.removesuffix(".weight")
        if len(shape) != 2 or "layers" not in module:
            continue
        r = ranks if isinstance(ranks, int) else ranks.get(module.rsplit(".", 1)[1], 4)
        out.append(TensorEntry(lora_key(module, "A"), dtype, (r, shape[1]), DIGEST))
        out.append(TensorEntry(lora_key(module, "B"), dtype, (shape[0], r), DIGEST))
    return sorted(out, key=lambda t: t.name)


def config(**changes: Any) -> str:
    base = {"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": list(LEAVES)}
    return json.dumps({**base, **changes})


def problems_of(*args: Any) -> list[str]:
    with pytest.raises(AdapterFormatError) as info:
        check_adapter(*args)
    return info.value.problems


def test_a_fitting_adapter_has_one_module_per_pair() -> None:
    shapes = backbone()
    layout = check_adapter(config(alpha_pattern={"v_proj": 2}), tensors(shapes), shapes)
    assert [m.name for m in layout.modules] == sorted(
        f"model.layers.{i}.self_attn.{leaf}" for i in range(2) for leaf in LEAVES
    )
    v = next(m for m in layout.modules if m.name.endswith("1.self_attn.v_proj"))
    assert (v.rank, v.alpha, v.scale, v.out_features, v.in_features) == (4, 2.0, 0.5, 18, 16)
    assert v.a == "base_model.model.model.layers.1.self_attn.v_proj.lora_A.weight"
    assert split_key(v.b) == ("model.layers.1.self_attn.v_proj", "B")


def test_registry_style_backbone_from_a_manifest() -> None:
    entries = [TensorEntry(name, "F32", shape, DIGEST) for name, shape in backbone().items()]
    assert backbone_shapes(entries) == backbone()


def test_every_tensor_problem_at_once() -> None:
    shapes = backbone()
    entries = tensors(shapes)
    entries = [t for t in entries if "layers.0.self_attn.q_proj.lora_B" not in t.name]
    entries.append(TensorEntry("base_model.model.x.lora_magnitude_vector", "F32", (4,), DIGEST))
    entries.append(
        TensorEntry(lora_key("model.layers.0.input_layernorm", "A"), "F32", (4, 16), DIGEST)
    )
    entries.append(
        TensorEntry(lora_key("model.layers.0.input_layernorm", "B"), "F32", (16, 4), DIGEST)
    )
    entries.append(TensorEntry(lora_key("model.layers.1.nope_proj", "A"), "I32", (4, 16), DIGEST))
    entries.append(TensorEntry(lora_key("model.layers.1.mlp.up", "A"), "F32", (4,), DIGEST))
    problems = problems_of(config(r=0), entries, shapes)
    assert problems == [
        "adapter_config.json: r must be a positive integer (at most 65536), got 0",
        "'base_model.model.x.lora_magnitude_vector': not a LoRA weight "
        "(base_model.model.<module>.lora_A.weight or .lora_B.weight)",
        "base_model.model.model.layers.1.nope_proj.lora_A.weight: dtype I32 is not floating point",
        "base_model.model.model.layers.1.mlp.up.lora_A.weight: shape [4] is not 2-D",
        "model.layers.0.input_layernorm: no nn.Linear in the backbone "
        "(no backbone tensor model.layers.0.input_layernorm.weight of shape [out, in])",
        "model.layers.0.self_attn.q_proj: lora_A and lora_B must both be present "
        "(found only lora_A)",
    ]


def test_rank_patterns_shape_and_target_problems() -> None:
    shapes = backbone()
    cfg = config(rank_pattern={"v_proj": 2}, target_modules=["q_proj", "k_proj", "v_proj"])
    problems = problems_of(cfg, tensors(shapes), shapes)
    assert problems[0] == (
        "model.layers.0.self_attn.o_proj: not among target_modules ['k_proj', 'q_proj', 'v_proj']"
    )
    assert problems[1] == (
        "model.layers.0.self_attn.v_proj.lora_A: shape [4, 16] and backbone weight [18, 16] "
        "do not fit: expected [2, 16] (rank 2)"
    )
    assert len(problems) == 2 * (1 + 2)  # per layer: o_proj untargeted, v_proj's A and B
    assert check_adapter(
        cfg.replace('"v_proj"]', '"v_proj", "o_proj"]'), tensors(shapes, {"v_proj": 2}), shapes
    )


def test_without_a_backbone_only_the_adapter_itself_is_checked() -> None:
    entries = tensors(backbone(), {"v_proj": 2})
    assert len(check_adapter(config(rank_pattern={"v_proj": 2}), entries).modules) == 8
    problems = problems_of(config(), entries)
    assert problems[0] == (
        "model.layers.0.self_attn.v_proj.lora_A: shape [2, 16] and backbone weight [18, 16] "
        "do not fit: expected [4, 16] (rank 4)"
    )
    assert problems_of(config(), []) == ["adapter_model.safetensors: no LoRA tensors"]


@settings(max_examples=100)
@given(
    st.integers(1, 3),
    st.dictionaries(st.sampled_from(LEAVES), st.integers(1, 8), max_size=4),
    st.integers(1, 8),
    st.data(),
)
def test_exactly_the_tensor_that_does_not_fit_is_reported(
    layers: int, ranks: dict[str, int], r: int, data: st.DataObject
) -> None:
    shapes = backbone(layers)
    entries = tensors(shapes, {leaf: ranks.get(leaf, r) for leaf in LEAVES})
    cfg = config(r=r, rank_pattern=ranks)
    assert len(check_adapter(cfg, entries, shapes).modules) == 4 * layers
    i = data.draw(st.integers(0, len(entries) - 1))
    bad = entries[i]
    grown = (bad.shape[0] + 1, bad.shape[1])
    entries[i] = TensorEntry(bad.name, bad.dtype, grown, DIGEST)
    problems = problems_of(cfg, entries, shapes)
    assert len(problems) == 1
    module, which = split_key(bad.name)  # type: ignore[misc]
    assert problems[0].startswith(f"{module}.lora_{which}: shape {list(grown)}")


@pytest.mark.timeout(60)  # a hang guard, not a speed target (bench/bench_lora_format.py)
def test_hostile_patterns_on_a_large_backbone_finish() -> None:
    leaves = (*LEAVES, "gate_proj", "up_proj", "down_proj")
    shapes = backbone(126, leaves)
    entries = tensors(shapes)
    half = MAX_VARIABLE_PATTERNS // 2
    nasty = {".*" * 60 + f"x{i}": 4 for i in range(half)}
    fixed = {f"model.layers.{'.' * (i % MAX_KEY_SHAPES)}zz{i:04d}": 4 for i in range(1000)}
    cfg = config(target_modules=list(leaves), rank_pattern={**nasty, **fixed}, alpha_pattern=nasty)
    assert len(check_adapter(cfg, entries, shapes).modules) == 126 * 7
    too_many = {f"(a|b){i}.*": 4 for i in range(MAX_VARIABLE_PATTERNS + 1)}
    problems = problems_of(config(rank_pattern=too_many), entries, shapes)
    assert any("at most 8 patterns with '.*' or '|'" in p for p in problems)
    shapes_ = {"." * i + "q_proj": 4 for i in range(MAX_KEY_SHAPES + 1)}
    problems = problems_of(config(alpha_pattern=shapes_), entries, shapes)
    assert any("alpha_pattern: at most 64 key shapes" in p for p in problems)
