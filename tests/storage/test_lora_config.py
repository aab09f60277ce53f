"""adapter_config.json: every field of peft's LoraConfig known, validated, refused by name."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.errors import AdapterFormatError, StorageError
from storage.lora import (
    MAX_CONFIG_BYTES,
    MAX_PATTERN_KEYS,
    MAX_RANK,
    OFF_FIELDS,
    LoraConfig,
    parse_config,
    read_config,
)
from storage.lora.fields import CORE_FIELDS, HARMLESS

BASE: dict[str, Any] = {
    "peft_type": "LORA",
    "r": 4,
    "lora_alpha": 8,
    "target_modules": ["q_proj", "v_proj"],
}


def config(**changes: Any) -> bytes:
    fields = {**BASE, **changes}
    return json.dumps({k: v for k, v in fields.items() if v is not _DROP}).encode()


_DROP = object()


def problems_of(raw: bytes | str) -> list[str]:
    with pytest.raises(AdapterFormatError) as info:
        parse_config(raw)
    assert isinstance(info.value, StorageError)
    assert isinstance(info.value, ValueError)
    return info.value.problems


# -- peft's own files ------------------------------------------------------------------------


def test_every_field_of_peft_lora_config_has_a_rule() -> None:
    from peft import LoraConfig as PeftLoraConfig

    known = CORE_FIELDS | set(HARMLESS) | set(OFF_FIELDS) | {"init_lora_weights", "bias"}
    fields = {f.name for f in dataclasses.fields(PeftLoraConfig)}
    assert fields - known == set(), "a peft upgrade added fields: classify them in fields.py"


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"task_type": "CAUSAL_LM", "lora_dropout": 0.05},
        {"rank_pattern": {"v_proj": 2}, "alpha_pattern": {"q_proj": 32}},
        {"use_rslora": True},
        {"target_modules": r".*\.(q|v)_proj"},
        {"init_lora_weights": "gaussian"},
        {"init_lora_weights": False, "inference_mode": True},
    ],
)
def test_configs_saved_by_peft_pass(tmp_path: Path, options: dict[str, Any]) -> None:
    from peft import LoraConfig as PeftLoraConfig

    settings_ = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"], **options}
    PeftLoraConfig(**settings_).save_pretrained(tmp_path)
    parsed = parse_config((tmp_path / "adapter_config.json").read_bytes())
    assert (parsed.r, parsed.alpha, parsed.use_rslora) == (4, 8.0, options.get("use_rslora", False))
    assert parsed.targets("model.layers.0.self_attn.q_proj")
    assert not parsed.targets("model.layers.0.self_attn.k_proj")


def test_peft_defaults_of_every_off_field_are_accepted() -> None:
    from peft import LoraConfig as PeftLoraConfig

    defaults = PeftLoraConfig(r=4, lora_alpha=8, target_modules=["q_proj"]).to_dict()
    for name in OFF_FIELDS:
        raw = config(**{name: defaults.get(name)})
        assert parse_config(raw).r == 4, name


# -- refusals, by field ----------------------------------------------------------------------

ON_VALUES = {"layers_pattern": "layers", "layers_to_transform": [0], "loftq_config": {"bits": 4}}


@pytest.mark.parametrize("name", sorted(OFF_FIELDS))
def test_features_that_change_the_forward_are_refused_by_name(name: str) -> None:
    value = ON_VALUES.get(name, True)
    problems = problems_of(config(**{name: value}))
    assert problems == [
        f"adapter_config.json: {name}={value!r} is not supported ({OFF_FIELDS[name]})"
    ]


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"lora_alpha": _DROP}, "lora_alpha is required"),
        ({"r": _DROP}, "r is required"),
        ({"r": "four"}, "r must be a positive integer (at most 65536), got 'four'"),
        ({"r": 0}, "r must be a positive integer"),
        ({"r": 4.0}, "r must be a positive integer"),
        ({"r": True}, "r must be a positive integer"),
        ({"r": MAX_RANK + 1}, "r must be a positive integer"),
        ({"r": 10**30}, "got 1000000000000000000000000000000"),
        ({"lora_alpha": "8"}, "lora_alpha must be a finite number"),
        ({"lora_alpha": 0}, "lora_alpha must be a finite number in (0, 1e+06]"),
        ({"lora_alpha": 1e7}, "lora_alpha must be a finite number"),
        ({"peft_type": "IA3"}, "peft_type must be \"LORA\", got 'IA3'"),
        ({"peft_type": _DROP}, 'peft_type must be "LORA", got nothing'),
        ({"use_rslora": "yes"}, "use_rslora must be true or false"),
        ({"target_modules": _DROP}, "target_modules must be a list"),
        ({"target_modules": []}, "target_modules must be a list"),
        ({"target_modules": ["q_proj", 3]}, "target_modules[1] must be a name"),
        ({"target_modules": "all-linear"}, "'all-linear' is a training-time shorthand"),
        ({"target_modules": "(a+)+$"}, "'+' is outside the supported subset"),
        ({"target_modules": "(q_proj"}, "unbalanced '('"),
        ({"rank_pattern": {"v_proj": 0}}, "rank_pattern['v_proj'] must be a positive integer"),
        ({"rank_pattern": {"(.*)*x": 2}}, "rank_pattern key: pattern '(.*)*x'"),
        ({"rank_pattern": ["v_proj"]}, "rank_pattern must be an object"),
        ({"alpha_pattern": {"v_proj": None}}, "alpha_pattern['v_proj'] must be a finite number"),
        ({"bias": "all"}, "bias='all' is not supported"),
        ({"init_lora_weights": "pissa"}, "init_lora_weights='pissa' is not supported"),
        ({"lora_dropout": 2}, "lora_dropout must be a number in [0, 1]"),
        ({"task_type": 7}, "task_type must be a string or null"),
        ({"future_feature": 1}, "unknown field future_feature=1 is not supported"),
        ({"fütüre": "on"}, "unknown field 'fütüre'='on'"),
    ],
)
def test_each_bad_field_is_named(changes: dict[str, Any], needle: str) -> None:
    problems = problems_of(config(**changes))
    assert any(needle in p for p in problems), problems
    assert all(p.startswith("adapter_config.json: ") for p in problems)


def test_every_problem_at_once() -> None:
    problems = problems_of(config(r=0, lora_alpha=_DROP, use_dora=True, bias="all", x=[1]))
    assert len(problems) == 5, problems


def test_unknown_fields_that_are_off_are_accepted() -> None:
    raw = config(future=None, flag=False, count=0, items=[], table={}, text="")
    assert parse_config(raw).r == 4


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ('{"r": 4, "lora_alpha": NaN}', "lora_alpha holds NaN or Infinity"),
        ('{"r": 4, "lora_alpha": Infinity}', "lora_alpha holds NaN or Infinity"),
        ('{"r": 4, "lora_alpha": -Infinity}', "lora_alpha holds NaN or Infinity"),
        ('{"r": 4, "lora_alpha": 1e999}', "lora_alpha holds NaN or Infinity"),
        ('{"r": 4, "x": {"y": [NaN]}}', "x holds NaN or Infinity"),
        ('{"r": 4, "r": 8}', "duplicate keys ['r']"),
        ('{"r": ' + "9" * 5000 + "}", "not valid JSON"),
        ("[" * 100_000, "not valid JSON"),
        ("[]", "must be a JSON object"),
        ("{", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b" " * (MAX_CONFIG_BYTES + 1), f"larger than {MAX_CONFIG_BYTES} bytes"),
    ],
)
def test_json_outside_the_standard_is_refused(raw: str | bytes, needle: str) -> None:
    problems = problems_of(raw)
    assert any(needle in p for p in problems), problems


def test_limits_on_sizes() -> None:
    keys = {f"m{i}": 2 for i in range(MAX_PATTERN_KEYS + 1)}
    assert any("at most 1024 module patterns" in p for p in problems_of(config(rank_pattern=keys)))
    many = problems_of(config(rank_pattern={f"m{i}": 0 for i in range(50)}))
    assert len(many) == 6  # five, then a count of the rest
    assert many[-1].endswith("... and 45 more like these")


# -- per-module rank, alpha and scale, as peft computes them -----------------------------------

rank = st.integers(1, 64)
alpha = st.floats(0.5, 512, allow_nan=False)
leaf = st.sampled_from(["q_proj", "k_proj", "v_proj", "o_proj", "up_proj"])
modules = st.builds(lambda i, n: f"model.layers.{i}.self_attn.{n}", st.integers(0, 12), leaf)


@settings(max_examples=200)
@given(
    rank,
    alpha,
    st.booleans(),
    st.dictionaries(leaf, rank, max_size=3),
    st.dictionaries(leaf, alpha, max_size=3),
    modules,
)
def test_scale_per_module_follows_peft(
    r: int,
    lora_alpha: float,
    rslora: bool,
    ranks: dict[str, int],
    alphas: dict[str, float],
    module: str,
) -> None:
    parsed = parse_config(
        config(
            r=r, lora_alpha=lora_alpha, use_rslora=rslora, rank_pattern=ranks, alpha_pattern=alphas
        )
    )
    leaf_name = module.rsplit(".", 1)[1]
    want_rank, want_alpha = ranks.get(leaf_name, r), alphas.get(leaf_name, lora_alpha)
    want = want_alpha / (math.sqrt(want_rank) if rslora else want_rank)
    assert parsed.rank_for(module) == want_rank
    assert parsed.scale_for(module) == pytest.approx(want)


def test_the_first_matching_pattern_key_wins() -> None:
    parsed = parse_config(config(rank_pattern={"layers.1.self_attn.q_proj": 2, "q_proj": 8}))
    assert parsed.rank_for("model.layers.1.self_attn.q_proj") == 2
    assert parsed.rank_for("model.layers.11.self_attn.q_proj") == 8
    assert parsed.rank_for("model.layers.1.self_attn.k_proj") == 4
    anchored = parse_config(config(rank_pattern={"^layers.1.self_attn.q_proj": 2}))
    assert anchored.rank_for("model.layers.1.self_attn.q_proj") == 4


def test_list_targets_match_names_and_dotted_tails() -> None:
    parsed = parse_config(config(target_modules=["q_proj", "mlp.up_proj", "lm_head"]))
    assert parsed.targets("model.layers.0.self_attn.q_proj")
    assert parsed.targets("model.layers.0.mlp.up_proj")
    assert parsed.targets("lm_head")
    assert not parsed.targets("model.layers.0.self_attn.xq_proj")
    assert not parsed.targets("model.layers.0.other_mlp.up_proj")


# -- any input: a config or a typed refusal ----------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
field_names = st.sampled_from(sorted(CORE_FIELDS | set(OFF_FIELDS) | set(HARMLESS))) | st.text(
    max_size=8
)


@settings(max_examples=150)
@given(st.dictionaries(field_names, json_values, max_size=8), st.booleans())
def test_any_json_object_gives_a_config_or_problems_that_name_the_file(
    fields: dict[str, Any], on_base: bool
) -> None:
    obj = {**BASE, **fields} if on_base else fields
    parsed, problems = read_config(json.dumps(obj))
    assert (parsed is None) or isinstance(parsed, LoraConfig)
    if parsed is None:
        assert problems
    for problem in problems:
        assert problem.startswith("adapter_config.json: ")
        assert "\n" not in problem


@given(st.binary(max_size=64))
def test_any_bytes_give_a_config_or_problems(raw: bytes) -> None:
    parsed, problems = read_config(raw)
    assert parsed is not None or problems
