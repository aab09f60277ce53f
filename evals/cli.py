"""`weact suite` (offline benchmark suites, files on disk) and `weact eval` (evaluations),
mounted by cli/main.py. (`weact benchmark` is a benchmark's record in a registry:
evals/registry_cli.py; `weact bench`, the old name of `weact suite`, stays a hidden alias.)

weact suite generate --suite research --seed S --out DIR [--train N --dev N --test N] [--json]
weact suite verify DIR [--json]
weact eval run --suite DIR --backbone B --adapter CAP=DIR ... --results FILE [--post ...]
weact eval list [--benchmark NAME]           (registry)
weact eval nll ...                            (the trainers' masked NLL, see trainers/eval_cli.py)
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import click

from evals.registry_cli import eval_list
from evals.run_cli import run
from trainers.eval_cli import nll


def _summary(
    manifest: dict[str, Any], path: Path, kinds: dict[str, Counter[str]]
) -> dict[str, Any]:
    return {
        "path": str(path),
        "name": manifest["name"],
        "seed": manifest["seed"],
        "digest": manifest["digest"],
        "questions": {split: dict(sorted(c.items())) for split, c in kinds.items()},
    }


def _print(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(summary, indent=2, sort_keys=True))
        return
    click.echo(f"suite {summary['name']} (seed {summary['seed']}) in {summary['path']}")
    click.echo(f"digest {summary['digest']}")
    for split, kinds in summary["questions"].items():
        listed = ", ".join(f"{k} {n}" for k, n in kinds.items())
        click.echo(f"  {split}: {sum(kinds.values())} questions ({listed})")


@click.group()
def suite() -> None:
    """Generate and verify offline benchmark suites."""


@suite.command()
@click.option("--suite", "name", default="research", show_default=True)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--train", default=25, show_default=True, help="Train questions per kind.")
@click.option("--dev", default=10, show_default=True, help="Dev questions per kind.")
@click.option("--test", default=40, show_default=True, help="Test questions per kind.")
@click.option("--json", "as_json", is_flag=True)
def generate(name: str, seed: int, out: Path, as_json: bool, **sizes: int) -> None:
    """Generate a suite deterministically from SEED into OUT (same seed, same bytes)."""
    from evals.errors import EvalError
    from evals.suite import generate_suite, write_suite

    if out.exists() and any(out.iterdir()):
        raise click.ClickException(f"{out} is not empty")
    try:
        suite = generate_suite(name, seed, sizes)
    except EvalError as exc:
        raise click.ClickException(str(exc)) from exc
    write_suite(suite, out)
    kinds = {s: Counter(q.kind for q in qs) for s, qs in suite.questions.items()}
    _print(_summary(suite.manifest(), out, kinds), as_json)


@suite.command()
@click.argument("path", type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True)
def verify(path: Path, as_json: bool) -> None:
    """Check every file of a suite against its manifest; print its digest."""
    from evals.errors import EvalError
    from evals.suite import load_suite

    try:
        suite = load_suite(path)
    except EvalError as exc:
        raise click.ClickException(str(exc)) from exc
    kinds = {s: Counter(q.kind for q in qs) for s, qs in suite.questions.items()}
    _print(_summary(suite.manifest(), path, kinds), as_json)


@click.group("eval")
def eval_() -> None:
    """Evaluate: evaluations in the registry, masked NLL of adapters."""


eval_.add_command(eval_list)
eval_.add_command(run)
eval_.add_command(nll)
