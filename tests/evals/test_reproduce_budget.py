"""The budget `make reproduce` states before it starts: bf16 here, a calibration on this
machine, the whole run's estimate from it, and the reduced size it recommends."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from evals.reproduce import budget
from evals.reproduce.config import ENV_PREFIX, FULL, REDUCED, sizes_from
from tasks.questions import KINDS


@pytest.fixture(autouse=True)
def no_size_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith(ENV_PREFIX)]:
        monkeypatch.delenv(name)


def test_bf16_is_native_only_with_its_flags(tmp_path: Path) -> None:
    avx2, amx, avx512 = tmp_path / "avx2", tmp_path / "amx", tmp_path / "avx512"
    avx2.write_text("flags\t\t: fpu sse2 avx2 fma\n")
    amx.write_text("flags\t\t: avx2 avx512f amx_bf16 amx_tile\n")
    avx512.write_text("flags\t\t: avx2 avx512f avx512_bf16\n")
    assert budget.bf16_native(str(avx2)) == (False, [])
    assert budget.bf16_native(str(amx)) == (True, ["amx_bf16"])
    assert budget.bf16_native(str(avx512)) == (True, ["avx512_bf16"])
    assert budget.bf16_native(str(tmp_path / "absent")) == (False, [])


def test_the_estimate_is_the_measured_costs_times_the_runs_counts() -> None:
    from evals.suite import generate_suite
    from runtime.tiny import build_tokenizer

    sizes = replace(FULL, train=2, test=3, train_dtype="float32")
    suite = generate_suite("research", 0, {"train": 2, "dev": 1, "test": 3})
    n = budget.counts(suite, build_tokenizer(), sizes)
    assert n.episodes == budget.METHODS * len(KINDS) * 3
    assert 0 < n.decode_per_episode <= sizes.max_episode_tokens
    more = budget.counts(suite, build_tokenizer(), replace(sizes, shared_epochs=3))
    assert more.lora_tokens > n.lora_tokens  # one more pass of the Single LoRA costs tokens
    from trainers.phases import build_samples

    samples = build_samples(suite.trajectories["train"], build_tokenizer())
    each = sizes.full_epochs * sum(len(s.input_ids) for s in samples)  # a forward per sample
    longest: dict[str, int] = {}
    for s in samples:
        longest[s.trajectory] = max(longest.get(s.trajectory, 0), len(s.input_ids))
    # packed: a trajectory's samples share its longest's forward, unless a step cuts it
    assert sizes.full_epochs * sum(longest.values()) <= n.full_tokens < each / 1.5
    padded = budget.full_sft_tokens(samples, sizes, max_tokens=8192)
    assert n.full_tokens < padded < 2 * n.full_tokens  # padded to each forward's longest row

    costs = budget.UnitCosts(lora_train=2e-3, full_train=5e-3, prefill=3e-4, decode=0.02)
    peft = budget.estimate(costs, n, "peft")
    assert peft["training (LoRA adapters)"] == pytest.approx(n.lora_tokens * 2e-3)
    assert peft["Full SFT"] == pytest.approx(n.full_tokens * 5e-3)
    per_episode = n.prefill_per_episode * 3e-4 + n.decode_per_episode * 0.02
    assert peft["episodes"] == pytest.approx(n.episodes * per_episode)
    assert peft["total"] == pytest.approx(sum(v for k, v in peft.items() if k != "total"))
    vllm = budget.estimate(costs, n, "vllm")  # decode steps batched over the episodes at once
    assert vllm["episodes"] < peft["episodes"]
    twice = budget.estimate(replace(costs, lora_train=4e-3), n, "peft")
    assert twice["training (LoRA adapters)"] == pytest.approx(2 * peft["training (LoRA adapters)"])


def test_over_45_minutes_it_recommends_the_reduced_size() -> None:
    costs = budget.UnitCosts(1e-3, 1e-3, 1e-4, 1e-2)
    native = (False, [])
    over = budget.budget_lines({"episodes": 3000.0, "total": 3000.0}, costs, native, "AVX2",
                               FULL, "full", "vllm")  # fmt: skip
    under = budget.budget_lines({"episodes": 600.0, "total": 600.0}, costs, native, "AVX2",
                                FULL, "full", "vllm")  # fmt: skip
    assert "bf16 not native" in over[0]
    assert "an estimate" in over[2]
    assert "whole run ~50 min" in over[2]
    assert "--size reduced" in over[-1]
    assert not any("--size reduced" in line for line in under)


def test_over_budget_the_reduced_size_is_estimated_with_the_same_calibration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The offer of the reduced size carries its estimate on this machine (its unit costs,
    the reduced size's counts): one AVX2 EPYC took 43 minutes for it, another did the same
    training 1.7-2.0x slower. The calibration itself is the test below's."""
    from evals.reproduce.__main__ import pre_run
    from evals.suite import generate_suite
    from runtime.tiny import build_tiny_backbone
    from trainers.training import tokenizer_of

    backbone = build_tiny_backbone(tmp_path / "backbone")
    costs = budget.UnitCosts(lora_train=2e-3, full_train=5e-3, prefill=3e-4, decode=0.02)
    monkeypatch.setattr(budget, "calibrate", lambda *_: costs)
    sizes = replace(sizes_from("quick"), train=2, test=2)
    monkeypatch.setattr(budget, "BUDGET_S", 0)  # every size is over it
    lines = pre_run(sizes, "quick", "peft", backbone)
    reduced = sizes_from("reduced", {"train_dtype": sizes.train_dtype})
    splits = {"train": reduced.train, "dev": reduced.dev, "test": reduced.test}
    suite = generate_suite("research", reduced.seed, splits)
    counts = budget.counts(suite, tokenizer_of(backbone), reduced)
    minutes = budget.estimate(costs, counts, "peft")["total"] / 60
    assert f"`--size reduced` (make reproduce REPRODUCE_ARGS='--size reduced'): estimated " \
        f"~{minutes:.0f} min here, measured" in lines[-1], lines  # fmt: skip
    asked = pre_run(sizes, "reduced", "peft", backbone)  # the reduced size offers no other
    assert not any("--size reduced" in line for line in asked), asked


def test_the_reduced_size_is_smaller_and_keeps_every_method() -> None:
    reduced = sizes_from("reduced")
    assert reduced.train < FULL.train
    assert reduced.test < FULL.test
    assert reduced.max_episode_tokens < FULL.max_episode_tokens
    assert reduced.shared_epochs == FULL.shared_epochs  # one pass scored 0 on every kind
    assert reduced == replace(REDUCED, train_dtype=reduced.train_dtype)


def test_calibration_measures_every_unit_cost(tmp_path: Path) -> None:
    from runtime.tiny import build_tiny_backbone

    backbone = build_tiny_backbone(tmp_path / "backbone")
    costs = budget.calibrate(backbone, sizes_from("quick"), tokens=32)
    assert costs.lora_train > 0
    assert costs.full_train > 0
    assert costs.prefill > 0
    assert costs.decode > 0
