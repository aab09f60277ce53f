"""Every method's test episodes on one engine, one method after another.

One engine is loaded once (the backbone, and for vLLM its minute-long start); each method
makes its library the engine's (`set_library`, adapters under version names `<cap>@<method>`
so no name ever refers to two sets of weights), runs the test split through
`evals.runner.run_suite` (resumable JSONL per method) and frees the previous library.

Runs in process for the reference engine, and as `python -m evals.reproduce.episodes PLAN`
in vLLM's own virtual environment for the vLLM engine (its interpreter pins other versions).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evals.engines import close_engine, library_key, vllm_cpu_args
from evals.runner import EpisodeSettings, ItemResult, ResultsLog, RunKey, run_suite
from evals.suite import Suite, load_suite


@dataclass(frozen=True)
class MethodRun:
    method: str
    library: dict[str, str]  # capability -> adapter directory
    policy: str  # "hard" or "soft"
    results: str  # JSONL results file

    def key(self, suite_digest: str, backbone: str, episode: dict[str, Any]) -> RunKey:
        """The run its results file must hold: `backbone` the manifest root of the weights it
        runs on, `episode` the caps (`EpisodeSettings.shape`)."""
        library = library_key(self.library)
        return RunKey(suite_digest, "test", library, self.policy, backbone, episode)


@dataclass(frozen=True)
class Plan:
    suite: str
    backbone: str
    engine: str
    methods: list[MethodRun]
    max_new_tokens: int
    max_steps: int
    concurrency: int
    max_phase_steps: int | None = None
    max_episode_tokens: int | None = None
    # the manifest root of `backbone`, hashed once where the plan is made (`cache.adapter_root`)
    backbone_root: str = field(kw_only=True)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Plan:
        methods = [MethodRun(**m) for m in obj["methods"]]
        return cls(**{**obj, "methods": methods})

    def settings(
        self, run: MethodRun, on_item: Callable[[ItemResult], None] | None = None
    ) -> EpisodeSettings:
        """A method's episode settings: the plan's caps, the runtime switching under hard."""
        return EpisodeSettings(
            policy=run.policy,
            max_steps=self.max_steps,
            max_new_tokens=self.max_new_tokens,
            concurrency=self.concurrency,
            runtime_switches=run.policy == "hard",
            max_phase_steps=self.max_phase_steps,
            max_episode_tokens=self.max_episode_tokens,
            on_item=on_item,
        )


def _specs(method: str, library: Mapping[str, str]) -> list[Any]:
    from runtime.engine import AdapterSpec
    from tasks.trajectories import DESCRIPTIONS

    return [
        AdapterSpec(cap, path, version=f"{cap}@{method}", description=DESCRIPTIONS.get(cap, ""))
        for cap, path in sorted(library.items())
    ]


def plan_rank(plan: Plan) -> int:
    """The vLLM LoRA rank that fits every method of the plan: one engine serves them all, and
    a TIES merge of four rank-8 adapters has rank 32, whatever the first method's is."""
    from runtime.engines.vllm import fitting_rank

    return fitting_rank([s for run in plan.methods for s in _specs(run.method, run.library)])


def _engine(plan: Plan, first: MethodRun) -> Any:
    specs = _specs(first.method, first.library)
    if plan.engine == "vllm":
        from runtime.engines.vllm import VllmEngine

        return VllmEngine(
            plan.backbone, specs, max_loras=2 * len(specs), max_lora_rank=plan_rank(plan),
            **vllm_cpu_args(plan.backbone, plan.concurrency),
        )  # fmt: skip
    from runtime.engines.peft import PeftEngine

    return PeftEngine(plan.backbone, specs)


def _progress(method: str, total: int, say: Callable[[str], None]) -> Callable[[ItemResult], None]:
    """A line every fifth of a method's episodes (and at its last), with the time so far."""
    start, done = time.perf_counter(), [0]
    every = max(1, total // 5)

    def on_item(_result: ItemResult) -> None:
        done[0] += 1
        if done[0] % every == 0 or done[0] == total:
            took = time.perf_counter() - start
            say(f"episodes: {method} {done[0]}/{total} in {took:.0f} s")

    return on_item


def run_plan(
    plan: Plan,
    on_method: Callable[[str, float, dict[str, ItemResult]], None] | None = None,
    say: Callable[[str], None] | None = None,
) -> dict[str, dict[str, ItemResult]]:
    """{method: {item id: result}} for every method of the plan, resumed where its results
    file holds this run (a file of other weights or caps is run again); `say` hears a
    progress line every fifth of a method's episodes."""
    suite = load_suite(plan.suite)
    out: dict[str, dict[str, ItemResult]] = {}
    if not plan.methods:
        return out
    engine = _engine(plan, plan.methods[0])
    try:
        for run in plan.methods:
            start = time.perf_counter()
            engine.set_library(_specs(run.method, run.library))
            engine.release_unused()
            progress = _progress(run.method, len(suite.questions["test"]), say) if say else None
            settings = plan.settings(run, progress)
            key = run.key(suite.digest, plan.backbone_root, settings.shape())
            if not ResultsLog.holds(run.results, key):
                Path(run.results).unlink()
                if say is not None:
                    say(f"episodes: {run.method}: its results are another run's; running again")
            out[run.method] = run_suite(
                engine, suite, results=run.results, library=key.library, backbone=key.backbone,
                split="test", settings=settings,
            )  # fmt: skip
            if on_method is not None:
                on_method(run.method, time.perf_counter() - start, out[run.method])
    finally:
        close_engine(engine)
    return out


def read_results(plan: Plan, suite: Suite) -> dict[str, dict[str, ItemResult]]:
    """The results files a (sub)process wrote, checked against their runs."""
    out = {}
    for run in plan.methods:
        key = run.key(suite.digest, plan.backbone_root, plan.settings(run).shape())
        log = ResultsLog(run.results, key)
        out[run.method] = {q.id: log.done[q.id] for q in suite.questions["test"]}
    return out


def seconds_file(plan_file: Path) -> Path:
    """Where `main` records each method's episode seconds, beside its plan."""
    return plan_file.with_suffix(".seconds.json")


def run_in_subprocess(plan: Plan, python: str, plan_file: Path) -> dict[str, float]:
    """`python -m evals.reproduce.episodes PLAN` (vLLM's interpreter); raises on failure.
    Returns the seconds each method's episodes took, as the subprocess measured them."""
    import subprocess

    plan_file.write_text(json.dumps(plan.to_json(), indent=2))
    seconds_file(plan_file).unlink(missing_ok=True)
    done = subprocess.run([python, "-m", "evals.reproduce.episodes", str(plan_file)], check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {plan.engine} episodes exited with {done.returncode}")
    return {str(k): float(v) for k, v in json.loads(seconds_file(plan_file).read_text()).items()}


def main(argv: list[str]) -> int:
    plan_file = Path(argv[0])
    plan = Plan.from_json(json.loads(plan_file.read_text()))
    seconds: dict[str, float] = {}

    def said(method: str, took: float, _results: object) -> None:
        seconds[method] = took
        seconds_file(plan_file).write_text(json.dumps(seconds))
        sys.stdout.write(f"episodes: {method} done in {took:.0f} s\n")
        sys.stdout.flush()

    def progress(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    run_plan(plan, said, progress)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
