"""The reproduce run: suite -> adapters (cached) -> every method's episodes -> continual part
through the registry -> report and chart."""

from __future__ import annotations

import os
import platform
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evals.reproduce.build import (
    CAPABILITIES,
    MERGES,
    Built,
    build_baselines,
    build_full,
    build_phases,
    phase_builder,
)
from evals.reproduce.cache import adapter_root
from evals.reproduce.config import Sizes
from evals.reproduce.efficiency import efficiency, efficiency_lines, stage_lines
from evals.reproduce.episodes import MethodRun, Plan, read_results, run_in_subprocess, run_plan
from evals.reproduce.report import (
    chart,
    common_answers,
    degenerate,
    sequence_lines,
    table,
    write_report,
)
from evals.suite import Suite, generate_suite, load_suite, write_suite
from tasks.questions import KINDS

# The rows that matter most first, so a run cut short still compares WeAct with baselines.
EVAL_ORDER = (
    "weact_hard", "single_lora", "backbone", "dare_ties", "ties", "additive", "weact_soft",
)  # fmt: skip
FULL_SFT = "full_sft"  # served on its own engine (another backbone), after the others
ALL_METHODS = (*EVAL_ORDER, FULL_SFT)
VLLM_PYTHON = Path(".venv-vllm/bin/python")
REPORT_FILE, CHART_FILE = "reproduce.md", "reproduce.png"
ENGINES = {
    "vllm": "vLLM's CPU build, episodes batched",
    "peft": "the reference PeftEngine, episodes interleaved token by token, not batched",
}


@dataclass
class Options:
    sizes: Sizes
    out: Path = Path("reports")
    work: Path = Path("reports/cache")
    backbone: Path | None = None  # None: SmolLM2-135M (converted once)
    engine: str = "peft"  # "peft", "vllm", or "auto" (vLLM when its venv exists)
    resume: bool = False  # continue the last run's episodes instead of re-evaluating
    continual: bool = True
    preset: str = "full"


@dataclass
class Outcome:
    rows: dict[str, dict[str, float]]
    continual: Any
    report: Path
    chart: Path
    built: Built
    timings: dict[str, float] = field(default_factory=dict)
    degenerate: list[str] = field(default_factory=list)
    efficiency: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.continual is None or self.continual.ok


def _suite(sizes: Sizes, work: Path) -> tuple[Suite, Path]:
    suite = generate_suite(
        "research", sizes.seed, {"train": sizes.train, "dev": sizes.dev, "test": sizes.test}
    )
    target = work / f"suite-{suite.digest[:16]}"
    try:
        load_suite(target)
    except Exception:  # absent or damaged: write it again
        shutil.rmtree(target, ignore_errors=True)
        write_suite(suite, target)
    return suite, target


def _log_adapters(log: Any, built: Built) -> None:
    said = [
        f"{n} ({'reused' if r else f'{built.seconds[n]:.0f} s'})" for n, r in built.reused.items()
    ]
    log("adapters: " + ", ".join(said))


def method_runs(
    built: Built, results: Path, methods: tuple[str, ...], soft: str = "choice"
) -> list[MethodRun]:
    """The runs of `methods`; WeAct-soft's policy is `soft` ("choice": constrained)."""
    a = built.adapters
    one = {"single_lora": "shared", **{m: m for m in MERGES}}
    libraries = {m: ({c: a[one[m]] for c in CAPABILITIES}, "hard") for m in methods if m in one}
    if "weact_hard" in methods:
        libraries["weact_hard"] = ({c: a[c] for c in CAPABILITIES}, "hard")
    if "weact_soft" in methods:  # the model chooses, its moves decoded under a constraint
        libraries["weact_soft"] = ({c: a[c] for c in CAPABILITIES}, soft)
    if FULL_SFT in methods:  # the fine-tuned backbone; a zero LoRA under every name
        libraries[FULL_SFT] = ({c: a["identity"] for c in CAPABILITIES}, "hard")
    if "backbone" in methods:  # no adapter: the bare backbone with the suite's tools
        libraries["backbone"] = ({}, "soft")
    return [
        MethodRun(
            m,
            {c: str(p) for c, p in libraries[m][0].items()},
            libraries[m][1],
            str(results / f"{m}.jsonl"),
        )  # fmt: skip
        for m in methods
    ]


def _engine(choice: str) -> str:
    if choice != "auto":
        return choice
    return "vllm" if VLLM_PYTHON.exists() else "peft"


def cuts(sizes: Sizes, engine: str) -> list[str]:
    k = len(KINDS)
    return [
        f"training data: {sizes.train} train questions per kind ({k * sizes.train} gold "
        f"trajectories), {sizes.epochs} epoch(s), LoRA rank {sizes.rank} "
        f"(the Single LoRA's {sizes.shared_rank}, {sizes.shared_epochs} epoch(s)), lr {sizes.lr}, "
        f"backbone in {sizes.train_dtype} while training; "
        "the paper trains on full research trajectories",
        f"test split: {sizes.test} questions per kind ({k * sizes.test} in all) per method; "
        "`weact suite generate` makes 40 per kind by default",
        "compare questions offer two options (chance: 50 %); a method that never retrieves "
        f"(doc recall 0) guesses there, and with {sizes.test} of them its score is 50 % give "
        f"or take {50 / sizes.test**0.5:.0f} points (one standard deviation)",
        f"the NLL gate scores the phase samples of the first {sizes.gate_items} test questions "
        "per kind (one forward pass per sample and adapter)",
        f"episodes: at most {sizes.max_steps} generation steps of {sizes.max_new_tokens} "
        f"tokens and {sizes.max_episode_tokens} generated tokens in all; under the hard policy "
        "the runtime makes each prescribed switch itself "
        f"(no bare-backbone turn before each phase) and moves on after {sizes.max_phase_steps} "
        "generations in one phase",
        f"engine: {engine} ({ENGINES[engine]})",
        f"Full SFT: every backbone parameter fine-tuned (fp32 weights, {sizes.train_dtype} "
        f"forward and backward, AdamW, lr {sizes.full_lr}, {sizes.full_batch} samples per step, "
        f"{sizes.full_epochs} epoch(s), untuned) on the Single LoRA's phase samples and loss "
        "mask; served on the same engine as its own backbone, under the hard policy with a "
        "zero (identity) LoRA loaded under each capability's name, so its episodes follow "
        "the adapter methods' protocol; not pushed to the registry (not an adapter)",
        "the continual gate judges masked NLL per test phase sample (library- and "
        "capability-scoped benchmarks), not end-task exact match, to keep it within budget",
        "WeAct-soft: the bare backbone chooses the adapters, no router trained; whenever no "
        "adapter is active the runtime offers only the valid moves (load a capability, or "
        "close) and takes the one of highest log-probability where the moves part ways, "
        "averaged over the orders in which load_lora lists the capabilities (the constrained "
        "soft policy; greedy under a mask, the first-listed capability won)",
        "backbone only: no adapter at all (the bare backbone with the suite's tools, no "
        "load_lora / offload_lora, no prescribed phases)",
    ]


def reproduce(opts: Options, log: Any = print) -> Outcome:
    start, load0 = time.perf_counter(), os.getloadavg()
    sizes, work = opts.sizes, opts.work
    work.mkdir(parents=True, exist_ok=True)
    if opts.backbone is None:
        from runtime.models import smollm2_dir

        backbone = smollm2_dir()
    else:
        backbone = opts.backbone
    suite, suite_dir = _suite(sizes, work)
    log(f"suite {suite.digest[:16]} in {suite_dir}")
    builder = phase_builder(suite_dir, backbone, work, sizes, log)
    built = build_phases(builder)
    timings = {f"train_{n}_s": built.seconds[n] for n in built.seconds}
    _log_adapters(log, built)
    results_dir = work / "results"
    if not opts.resume:
        shutil.rmtree(results_dir, ignore_errors=True)
    results_dir.mkdir(parents=True, exist_ok=True)
    engine = _engine(opts.engine)
    info = {"backbone": str(backbone), "suite": suite.digest, "engine": engine, "load0": load0}

    def publish(results: dict[str, Any], continual: Any, status: str) -> tuple[Path, Path | None]:
        """The report as it stands (rewritten after each stage, so a cut-short run leaves
        what it measured)."""
        timings["wall_s"] = time.perf_counter() - start
        rows = table(results)
        png = chart(rows, opts.out / CHART_FILE) if rows else None
        run = _run_info(opts, built, timings, info, status)
        answers = common_answers(results)
        phases = {q.id: q.phases for q in suite.questions["test"]}
        sections = ["## Efficiency: where episode time went", ""]
        sections += efficiency_lines(efficiency(results), engine) if results else ["(no episodes)"]
        sections += ["", "## Stage times", "", *stage_lines(timings)]
        report = write_report(
            opts.out / REPORT_FILE, rows, continual, run, cuts(sizes, engine), answers,
            sequence_lines(results, phases), sections,
        )  # fmt: skip
        return report, png

    continual = None
    if opts.continual:  # first: it needs no episodes, and the gate is the product's promise
        from evals.reproduce.continual import run_continual

        t = time.perf_counter()
        log("continual part (registry, gate): running ...")
        with tempfile.TemporaryDirectory(dir=work, prefix="registry-") as tmp:
            continual = run_continual(built, suite, suite_dir, backbone, Path(tmp), sizes)
        timings["continual_s"] = time.perf_counter() - t
        log(f"continual part: done in {timings['continual_s']:.1f} s")
        publish({}, continual, "partial: continual part done, episodes running")
    results: dict[str, Any] = {}

    def on_method(method: str, seconds: float, done: dict[str, Any]) -> None:
        results[method] = done
        timings[f"episodes_{method}_s"] = seconds
        log(f"episodes: {method} in {seconds:.0f} s")
        publish(results, continual, f"partial: {len(results)} of {len(ALL_METHODS)} methods")

    def episodes(methods: tuple[str, ...], served: Path, plan_file: str) -> None:
        runs = method_runs(built, results_dir, methods)
        plan = Plan(str(suite_dir), str(served), engine, runs,
                    sizes.max_new_tokens, sizes.max_steps, sizes.concurrency,
                    sizes.max_phase_steps, sizes.max_episode_tokens,
                    backbone_root=adapter_root(served))  # fmt: skip
        log(f"episodes: starting the {engine} engine for {', '.join(methods)}")
        if engine == "vllm":
            seconds = run_in_subprocess(plan, str(VLLM_PYTHON), work / plan_file)
            for method, done in read_results(plan, suite).items():
                on_method(method, seconds[method], done)
        else:
            run_plan(plan, on_method, log)

    build_baselines(builder)
    timings["merges_s"] = sum(built.seconds[m] for m in MERGES)
    timings["single_lora_s"] = built.seconds["shared"]
    build_full(builder)
    timings["full_sft_s"] = built.seconds["full_sft"] + built.seconds["identity"]
    _log_adapters(log, built)
    episodes(EVAL_ORDER, backbone, "episodes-plan.json")  # one engine start for them all
    episodes((FULL_SFT,), built.adapters[FULL_SFT], "episodes-full-sft.json")
    t = time.perf_counter()
    publish(results, continual, "complete")
    timings["report_s"] = time.perf_counter() - t
    log(f"report: written in {timings['report_s']:.1f} s")
    report, png = publish(results, continual, "complete")
    rows = table(results)
    assert png is not None
    return Outcome(
        rows, continual, report, png, built, timings, degenerate(rows), efficiency(results)
    )


def _run_info(
    opts: Options, built: Built, timings: dict[str, float], info: dict[str, Any], status: str
) -> dict[str, Any]:
    return {
        "status": status,
        "command": f"python -m evals.reproduce ({opts.preset} size)",
        "backbone": info["backbone"],
        "suite digest": info["suite"],
        "sizes": opts.sizes.to_json(),
        "engine": info["engine"],
        "adapters reused from the cache": sorted(n for n, r in built.reused.items() if r) or "none",
        "adapter seconds": {n: round(s, 1) for n, s in built.seconds.items()},
        "timings (s)": {k: round(v, 1) for k, v in timings.items()},
        "load average at start / now": f"{info['load0']} / {os.getloadavg()}",
        "cpus": f"{os.cpu_count()} ({platform.processor() or platform.machine()})",
        "chart_file": CHART_FILE,
    }
