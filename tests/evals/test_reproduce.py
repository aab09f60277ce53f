"""`make reproduce` at its quick size on the tiny model: the whole pipeline, end to end.

Suite -> adapters trained / merged by the library calls behind `weact train` / `weact merge`
-> every method's test episodes -> the continual part through a real `weact serve` and its gate ->
reports/reproduce.md and the chart. A second run, `--resume`, reuses every adapter and reads
every episode back (none runs again).

In the default suite: eleven trainings, Full SFT, the continual part through `weact serve`,
eight methods' episodes (WeAct-soft under the constrained choice, Full SFT on its own engine)
and the resumed run; `python -m pytest tests/evals/test_reproduce.py --durations=3`.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from evals.reproduce.build import shuffled_answers
from evals.reproduce.cache import adapter_root
from evals.reproduce.config import ENV_PREFIX, QUICK, sizes_from
from evals.reproduce.pipeline import Options, reproduce
from evals.reproduce.report import METHODS
from tasks.questions import KINDS


@pytest.fixture(autouse=True)
def no_size_variables(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No `REPRODUCE_*` variable of the caller's shell reaches a test's sizes."""
    import os

    for name in [n for n in os.environ if n.startswith(ENV_PREFIX)]:
        monkeypatch.delenv(name)
    return monkeypatch


@pytest.fixture(scope="module")
def backbone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from runtime.tiny import build_tiny_backbone

    return build_tiny_backbone(tmp_path_factory.mktemp("tiny") / "backbone")


def test_one_vllm_engine_is_sized_for_the_largest_rank_of_every_method(
    backbone: Path, tmp_path: Path
) -> None:
    """The baselines' engine starts with the Single LoRA's library (rank 4 here) and later
    serves a merge of higher rank: its LoRA slots are sized for all methods up front."""
    from evals.reproduce.episodes import MethodRun, Plan, plan_rank
    from runtime.tiny import build_tiny_adapter

    small = build_tiny_adapter(backbone, tmp_path / "small", seed=1, rank=4)
    merged = build_tiny_adapter(backbone, tmp_path / "merged", seed=2, rank=24)
    caps = ("plan", "write")
    runs = [
        MethodRun(m, {c: str(p) for c in caps}, "hard", str(tmp_path / f"{m}.jsonl"))
        for m, p in (("single_lora", small), ("ties", merged))
    ]
    plan = Plan(str(tmp_path), str(backbone), "vllm", runs, 8, 4, 2, backbone_root="-")
    assert plan_rank(plan) == 32  # vLLM's smallest rank >= 24, not the first method's 8
    assert plan_rank(replace(plan, methods=runs[:1])) == 8


def test_the_vllm_kv_cache_holds_every_episode_at_once(tmp_path: Path) -> None:
    """SmolLM2-135M: 30 layers x 3 KV heads x 64 dims x K and V x 2 bytes = 23,040 bytes a
    token in bf16; 40 episodes of 4,096 tokens need 3.5 GiB, more than the 1 GiB floor."""
    from evals.engines import vllm_cpu_args
    from runtime.engines.vllm import kv_cache_bytes

    config = {"num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
              "hidden_size": 576}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert kv_cache_bytes(tmp_path, 1, 1, "bfloat16") == 23_040
    assert kv_cache_bytes(tmp_path, 40, 4096, "float32") == 2 * 23_040 * 40 * 4096
    args = vllm_cpu_args(str(tmp_path), 40)
    assert args["kv_cache_memory_bytes"] == kv_cache_bytes(
        tmp_path, 40, args["max_model_len"], args["dtype"]
    )
    assert vllm_cpu_args(str(tmp_path), 1)["kv_cache_memory_bytes"] == 2**30


def test_episodes_in_a_subprocess_report_each_methods_seconds(
    backbone: Path, tmp_path: Path
) -> None:
    """The vLLM path runs the episodes under another interpreter; the seconds each method
    took come back with the results (the report printed 0.0 for them before)."""
    import sys

    from evals.reproduce.episodes import MethodRun, Plan, read_results, run_in_subprocess
    from evals.suite import generate_suite, write_suite
    from runtime.tiny import build_tiny_adapter

    suite = generate_suite("research", seed=1, sizes={"train": 1, "dev": 1, "test": 1})
    write_suite(suite, tmp_path / "suite")
    adapter = build_tiny_adapter(backbone, tmp_path / "adapter", seed=1, rank=2)
    runs = [
        MethodRun(m, {c: str(adapter) for c in ("plan", "search", "code", "write")}, "hard",
                  str(tmp_path / f"{m}.jsonl"))
        for m in ("single_lora", "ties")
    ]  # fmt: skip
    plan = Plan(str(tmp_path / "suite"), str(backbone), "peft", runs, 4, 3, 2, 1,
                backbone_root=adapter_root(backbone))  # fmt: skip

    seconds = run_in_subprocess(plan, sys.executable, tmp_path / "plan.json")

    assert set(seconds) == {"single_lora", "ties"}
    assert all(s > 0 for s in seconds.values())
    results = read_results(plan, suite)
    assert all(len(r) == len(suite.questions["test"]) for r in results.values())


def test_resumed_episodes_are_kept_only_for_the_same_weights_and_caps(
    backbone: Path, tmp_path: Path
) -> None:
    """`--resume` keeps a method's episodes only where its results file names the same
    backbone weights and episode caps: a retrained Full SFT is another backbone under the same
    zero library, and its old episodes were kept before the key named the backbone."""
    from evals.reproduce.episodes import MethodRun, Plan, run_plan
    from evals.suite import generate_suite, write_suite
    from runtime.tiny import build_tiny_adapter, build_tiny_backbone

    suite = generate_suite("research", seed=1, sizes={"train": 1, "dev": 1, "test": 1})
    write_suite(suite, tmp_path / "suite")
    adapter = build_tiny_adapter(backbone, tmp_path / "adapter", seed=1, rank=2)
    library = {c: str(adapter) for c in ("plan", "search", "code", "write")}
    results = tmp_path / "full_sft.jsonl"
    plan = Plan(str(tmp_path / "suite"), str(backbone), "peft",
                [MethodRun("full_sft", library, "hard", str(results))], 4, 3, 2, 1,
                backbone_root=adapter_root(backbone))  # fmt: skip
    retrained = build_tiny_backbone(tmp_path / "retrained", seed=1)
    on_retrained = replace(plan, backbone=str(retrained), backbone_root=adapter_root(retrained))

    def episodes_run(p: Plan) -> tuple[int, list[str]]:
        said: list[str] = []
        run_plan(p, say=said.append)
        return sum(bool(re.match(r"episodes: full_sft \d+/\d+ in", x)) for x in said), said

    def header() -> dict[str, Any]:
        return dict(json.loads(results.read_text().splitlines()[0])["run"])

    total = len(suite.questions["test"])
    assert episodes_run(plan)[0] == total
    first = header()
    assert episodes_run(plan)[0] == 0  # the same run: every episode kept
    count, said = episodes_run(on_retrained)
    assert count == total
    assert "episodes: full_sft: its results are another run's; running again" in said
    assert header()["backbone"] != first["backbone"]
    assert header()["library"] == first["library"]
    assert episodes_run(replace(on_retrained, max_new_tokens=5))[0] == total
    assert header()["episode"]["max_new_tokens"] == 5


def test_reproduce_quick_runs_every_method_and_the_gate(backbone: Path, tmp_path: Path) -> None:
    opts = Options(
        sizes_from("quick"), out=tmp_path / "reports", work=tmp_path / "cache",
        backbone=backbone, engine="peft", preset="quick",
    )  # fmt: skip
    said: list[str] = []
    outcome = reproduce(opts, log=said.append)
    progress = re.compile(r"episodes: \w+ \d+/\d+ in")  # a fifth of a method's episodes ran
    assert any(progress.match(line) for line in said)

    assert set(outcome.rows) == set(METHODS)
    for row in outcome.rows.values():
        assert set(KINDS) <= set(row)
        assert row["n"] == len(KINDS) * QUICK.test
    text = outcome.report.read_text()
    for label in ("| WeAct-hard |", "| WeAct-soft |", "| Backbone only |", "| TIES merge |",
                  "| Full SFT (every backbone parameter) |"):  # fmt: skip
        assert label in text
    assert "Full SFT (not run here)" not in text
    assert "WeAct-hard minus it" in text
    assert "Power: an exact McNemar test at 0.05 needs at least 6 discordant" in text
    assert "WeAct-soft: adapters loaded per test question, by kind" in text
    assert outcome.built.adapters["full_sft"].joinpath("config.json").is_file()
    for paper in ("45.47", "42.80", "38.73", "35.66"):
        assert paper in text
    assert "## What was cut to fit the budget" in text
    # efficiency from the runtime's own timers: every method, WeAct-hard's switches timed
    assert set(outcome.efficiency) == set(METHODS)
    hard = outcome.efficiency["weact_hard"]
    assert hard["switch_s"] > 0
    assert 0 < hard["switch_share"] < 1
    assert "vs_full_sft" in hard
    assert hard["prefilled_mean"] > 0  # the engine's own counts
    assert hard["decoded_mean"] > 0
    assert "## Efficiency: where episode time went" in text
    assert f"| WeAct-hard | {len(KINDS) * QUICK.test} | {100 * hard['switch_share']:.2f} %" in text
    stages = text[text.index("## Stage times") :]
    names = ("train plan", "merges", "Single LoRA", "Full SFT", "continual part",
             "episodes: WeAct-soft", "episodes: Full SFT", "report", "**whole run**")  # fmt: skip
    for stage in names:
        assert f"| {stage}" in stages
    assert outcome.chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    continual = outcome.continual
    passed = {p.name: p.passed for p in continual.promotions}
    assert passed == {
        "plan + search + write": True,
        "add LoRA-code": True,
        "write -> write++ (no replay)": True,
        "write++ -> bad write (shuffled answers)": False,
    }
    refused = continual.promotions[-1].report
    assert refused["passed"] is False
    failed = [c for c in refused["checks"] if c["verdict"] == "fail"]
    assert failed
    assert all(c["test"] == "paired_bootstrap" for c in failed)
    assert {c["benchmark"] for c in failed} <= {"research-nll", "write-nll"}
    assert all(c["candidate_by"] == "ci" for c in refused["checks"])
    assert continual.roots_ok, continual.roots
    assert continual.replay == dict.fromkeys(
        ["plan", "search", "write", "code", "write++", "write-bad"], False
    )
    assert "refused (409)" in text
    assert outcome.ok

    # run again, resumed: every adapter from the cache, every episode read back, none rerun
    said.clear()
    again = reproduce(
        Options(**{**opts.__dict__, "continual": False, "resume": True}), log=said.append
    )
    assert again.built.reused
    assert all(again.built.reused.values())
    assert again.rows == outcome.rows
    assert not [line for line in said if progress.match(line)], said
    assert any(line.startswith("episodes: weact_hard in") for line in said)


def test_efficiency_shares_are_the_recorded_timings_summed() -> None:
    import random

    from evals.reproduce.efficiency import efficiency, efficiency_lines
    from evals.runner import ItemResult
    from evals.scoring import ItemScore

    rng = random.Random(7)

    def item(n: int, switch: float | None, rebuild: float | None) -> ItemResult:
        score = ItemScore(f"q{n}", "name", "a", 0.0, 0.0, 0.0, 0.0)
        timed = switch is not None
        return ItemResult(
            score, "answer", 5 + n, rng.uniform(1, 9), (), switch, rebuild,
            100 * n if timed else None,
        )  # fmt: skip

    hard = {f"q{n}": item(n, rng.uniform(0, 0.5), rng.uniform(0, 1)) for n in range(6)}
    full = {f"q{n}": item(n, 0.0, rng.uniform(0, 1)) for n in range(6)}
    old = {"q0": item(0, None, None)}  # a results file from before the timers were kept
    rows = efficiency({"weact_hard": hard, "full_sft": full, "ties": old})

    assert set(rows) == {"weact_hard", "full_sft"}
    elapsed = sum(r.elapsed_s for r in hard.values())
    assert rows["weact_hard"]["switch_share"] == pytest.approx(
        sum(r.switch_s or 0 for r in hard.values()) / elapsed
    )
    assert rows["weact_hard"]["rebuild_share"] == pytest.approx(
        sum(r.rebuild_s or 0 for r in hard.values()) / elapsed
    )
    full_mean = sum(r.elapsed_s for r in full.values()) / 6
    assert rows["weact_hard"]["vs_full_sft"] == pytest.approx(elapsed / 6 / full_mean)
    assert rows["full_sft"]["switch_share"] == 0
    # tokens per episode: prefilled 0, 100, ..., 500 and decoded 5, ..., 10 -> means 250, 7.5
    assert (rows["weact_hard"]["prefilled_mean"], rows["weact_hard"]["decoded_mean"]) == (
        250.0, 7.5,
    )  # fmt: skip
    line = next(x for x in efficiency_lines(rows, "peft") if x.startswith("| WeAct-hard"))
    assert f"{100 * rows['weact_hard']['switch_share']:.2f} %" in line
    assert "| 250, 8 |" in line
    # the timings and tokens survive the results file; an older file's items have neither
    again = ItemResult.from_json(hard["q1"].to_json())
    assert again.switch_s == pytest.approx(hard["q1"].switch_s, abs=1e-6)
    assert again.prefilled == 100
    older = ItemResult.from_json(old["q0"].to_json())
    assert (older.switch_s, older.prefilled) == (None, None)
    untallied = {"q0": ItemResult(old["q0"].score, "answer", 5, 1.0, (), 0.0, 0.0)}
    assert "prefilled_mean" not in efficiency({"backbone": untallied})["backbone"]


def test_shuffled_answers_give_every_question_another_answer() -> None:
    from evals.suite import generate_suite

    suite = generate_suite("research", seed=3, sizes={"train": 2, "dev": 1, "test": 1})
    lines = [json.dumps(t.to_json()) for t in suite.trajectories["train"]]
    shuffled = [json.loads(line) for line in shuffled_answers(lines, seed=0)]

    def answers(rows: list[dict]) -> list[str]:
        return [
            m["content"] for r in rows for m in r["messages"]
            if m["role"] == "assistant" and "\nAnswer:" in (m.get("content") or "")
        ]  # fmt: skip

    before, after = answers([json.loads(line) for line in lines]), answers(shuffled)
    assert sorted(before) == sorted(after)
    assert all(b != a for b, a in zip(before, after, strict=True))
    assert shuffled_answers(lines, seed=0) == shuffled_answers(lines, seed=0)


def test_sizes_come_from_flags_then_environment(no_size_variables: pytest.MonkeyPatch) -> None:
    env = no_size_variables
    with pytest.raises(ValueError, match="test must be at least 1"):
        sizes_from("full", {"test": 0})
    env.setenv("REPRODUCE_TEST", "5")
    env.setenv("REPRODUCE_TRAIN", "3")
    sizes = sizes_from("full", {"test": 7})
    assert (sizes.test, sizes.train) == (7, 3)
    assert sizes_from("quick").test == 5  # the environment beats the preset
    env.setenv("REPRODUCE_LR", "fast")
    with pytest.raises(ValueError, match="REPRODUCE_LR='fast': expected float"):
        sizes_from("full")


def test_training_dtype_follows_the_cpu(
    tmp_path: Path, no_size_variables: pytest.MonkeyPatch
) -> None:
    from runtime.engines.vllm.engine import cpu_dtype

    with_bf16, without = tmp_path / "bf16", tmp_path / "avx2"
    with_bf16.write_text("flags\t\t: fpu sse2 avx2 avx512f avx512_bf16\n")
    without.write_text("flags\t\t: fpu sse2 avx2\n")
    assert (cpu_dtype(str(with_bf16)), cpu_dtype(str(without))) == ("bfloat16", "float32")
    assert cpu_dtype(str(tmp_path / "absent")) == "float32"
    assert sizes_from("full").train_dtype == cpu_dtype()  # "auto", resolved
    no_size_variables.setenv("REPRODUCE_TRAIN_DTYPE", "bfloat16")
    assert sizes_from("full").train_dtype == "bfloat16"
    no_size_variables.setenv("REPRODUCE_TRAIN_DTYPE", "fp8")
    with pytest.raises(ValueError, match="train_dtype must be one of auto, float32"):
        sizes_from("full")


def test_the_report_shows_what_a_method_answers_most_often() -> None:
    from evals.reproduce.report import answer_lines, common_answers, degenerate, table
    from evals.runner import ItemResult
    from evals.scoring import ItemScore

    def item(n: int, kind: str, answer: str, em: float) -> ItemResult:
        return ItemResult(ItemScore(f"q{n}", kind, answer, em, em, 0.0, 0.0), "answer", 5, 1.0)

    echo = '<tool_response>\n{"ok": true, "active": "write"}\n</tool_response>'
    results = {
        "backbone": {f"q{n}": item(n, k, echo, 0.0) for n, k in enumerate(KINDS)},
        "weact_hard": {
            "q0": item(0, "name", "Ada | Lovelace", 1.0),
            **{f"q{n}": item(n, k, "1921", 0.0) for n, k in enumerate(KINDS) if n},
        },
    }
    answers = common_answers(results)
    n = len(KINDS)
    assert answers["backbone"] == (" ".join(echo.split()), n, n)
    assert answers["weact_hard"] == ("1921", n - 1, n)
    assert degenerate(table(results)) == ["backbone"]
    lines = answer_lines({"weact_hard": ("Ada | Lovelace", 1, 4)})
    assert lines[-1] == "| WeAct-hard | `Ada \\| Lovelace` | 1 of 4 |"


def test_a_training_seed_trains_other_adapters_on_the_same_questions(
    backbone: Path, tmp_path: Path
) -> None:
    """`--train-seed` moves the trainings (their own cache entries), never the data."""
    from evals.reproduce.build import adapter_root, phase_builder
    from evals.reproduce.pipeline import _suite

    runs = []
    for seed in (0, 1, 0):
        sizes = replace(QUICK, train_seed=seed)
        suite, suite_dir = _suite(sizes, tmp_path / "work")
        builder = phase_builder(suite_dir, backbone, tmp_path / "work", sizes)
        train = builder.built.data["train"]
        path = builder.train("plan", train, capability="plan", lr=sizes.lr, epochs=1)
        data = (suite.digest, train.read_bytes())
        runs.append((data, adapter_root(path), builder.built.reused["plan"]))
    (data0, root0, reused0), (data1, root1, reused1), (_, root0_again, reused0_again) = runs
    assert data0 == data1
    assert root0 != root1  # another init and order: other weights
    assert (root0_again, reused0, reused0_again) == (root0, False, True)  # seed 0's, reused
    assert reused1 is False
