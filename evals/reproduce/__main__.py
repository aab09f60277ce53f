"""python -m evals.reproduce [--size full|reduced|quick] [--<field> N ...] [--engine peft|vllm|auto]
[--resume] [--estimate-only | --no-estimate]

Before it starts it says whether bf16 is native on this CPU and estimates the whole run
from a short calibration here (`evals.reproduce.budget`); over 45 minutes it recommends
`--size reduced`."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path

from evals.reproduce.config import REDUCED_AVX2_MINUTES, Sizes, sizes_from


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m evals.reproduce", description=__doc__)
    parser.add_argument(
        "--size", choices=["full", "reduced", "quick"], default=None,
        help=f"full (default); reduced: {REDUCED_AVX2_MINUTES} minutes on one 2-core fp32 AVX2 "
        "CPU; quick: the test's.",
    )  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="Same as --size quick.")
    parser.add_argument("--estimate-only", action="store_true", help="Estimate, then stop.")
    parser.add_argument("--no-estimate", dest="estimate", action="store_false")
    parser.add_argument("--out", type=Path, default=Path("reports"))
    parser.add_argument("--work", type=Path, default=None, help="Cache (default OUT/cache).")
    parser.add_argument("--backbone", type=Path, default=None, help="Default: SmolLM2-135M.")
    parser.add_argument("--engine", choices=["peft", "vllm", "auto"], default="peft")
    parser.add_argument("--resume", action="store_true", help="Continue the last episodes.")
    parser.add_argument("--no-continual", dest="continual", action="store_false")
    for f in fields(Sizes):
        parser.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, type=type(f.default))
    return parser.parse_args(argv)


def say(line: str, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(line + "\n")
    stream.flush()


def pre_run(sizes: Sizes, preset: str, engine: str, backbone: Path | None) -> list[str]:
    """bf16 here, the calibration and the whole run's estimate (`budget_lines`)."""
    from evals.reproduce import budget
    from evals.reproduce.pipeline import _engine
    from evals.suite import generate_suite
    from trainers.training import tokenizer_of

    if backbone is None:
        from runtime.models import smollm2_dir

        backbone = smollm2_dir()
    tokenizer, engine = tokenizer_of(backbone), _engine(engine)
    costs = budget.calibrate(backbone, sizes)

    def estimated(s: Sizes) -> dict[str, float]:
        suite = generate_suite("research", s.seed, {"train": s.train, "dev": s.dev, "test": s.test})
        return budget.estimate(costs, budget.counts(suite, tokenizer, s), engine)

    parts = estimated(sizes)
    reduced = None
    if parts["total"] > budget.BUDGET_S and preset != "reduced":  # what it offers instead
        reduced = estimated(sizes_from("reduced", {"train_dtype": sizes.train_dtype}))["total"]
    return budget.budget_lines(
        parts, costs, budget.bf16_native(), budget.torch_kernels(), sizes, preset, engine,
        reduced_total=reduced,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    import logging

    from evals.reproduce.pipeline import Options, reproduce
    from evals.reproduce.report import accuracy_table

    logging.getLogger("httpx").setLevel(logging.WARNING)
    args = parse(sys.argv[1:] if argv is None else argv)
    preset = "quick" if args.quick else args.size or "full"
    try:
        sizes = sizes_from(preset, {f.name: getattr(args, f.name) for f in fields(Sizes)})
    except ValueError as exc:
        say(f"error: {exc}", err=True)
        return 2
    if args.estimate or args.estimate_only:
        for line in pre_run(sizes, preset, args.engine, args.backbone):
            say(line)
        if args.estimate_only:
            return 0
    opts = Options(
        sizes, out=args.out, work=args.work or args.out / "cache", backbone=args.backbone,
        engine=args.engine, resume=args.resume, continual=args.continual, preset=preset,
    )  # fmt: skip
    outcome = reproduce(opts, say)
    say("\n".join(accuracy_table(outcome.rows)))
    if outcome.continual is not None:
        for p in outcome.continual.promotions:
            say(f"gate: {p.name}: {'passed' if p.passed else 'refused'} (expected "
                  f"{'pass' if p.expected else 'refusal'})")  # fmt: skip
        say(f"roots kept: {outcome.continual.roots_ok}")
    if outcome.degenerate:
        say(f"warning: 0 % or 100 % on every kind: {', '.join(outcome.degenerate)}")
    say(f"report: {outcome.report}, chart: {outcome.chart}; wall {outcome.timings['wall_s']:.0f} s")
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
