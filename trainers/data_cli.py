"""`weact data`: the training data's commands (mounted lazily by cli/main.py).

weact data generate OUT [--n N] [--seed S] [--phases plan,search,write] [--write-style]
weact data inspect FILE --backbone PATH [--capability C] [--json]

`weact train generate|inspect` are their old spellings (hidden, one release).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from clikit.errors import fail_cleanly
from registry.errors import RegistryError
from storage.errors import StorageError
from trainers.errors import TrainerError

_fail_cleanly = fail_cleanly(RegistryError, StorageError, TrainerError)


@click.group()
def data() -> None:
    """Training data: generate research trajectories, inspect a file's phase samples."""


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--backbone", required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--capability", help="Only this capability's phases.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per sample.")
@_fail_cleanly
def inspect(file: Path, backbone: Path, capability: str | None, as_json: bool) -> None:
    """Print each phase sample; unsupervised tokens are dimmed."""
    from trainers.training import read_samples, tokenizer_of

    samples = read_samples([file], backbone, {capability} if capability else None)
    if as_json:
        for sample in samples:
            click.echo(json.dumps(sample.to_json()))
        return
    _show(samples, tokenizer_of(backbone))


def _show(samples: Sequence[Any], tokenizer: Any) -> None:
    from itertools import groupby

    from rich.console import Console
    from rich.text import Text

    console = Console(highlight=False)
    for s in samples:
        console.rule(
            f"{s.trajectory} · phase {s.phase} · {s.capability} · "
            f"{len(s.input_ids)} tokens, {s.n_supervised} supervised"
        )
        text = Text()
        pairs = zip(s.input_ids, s.loss_mask, strict=True)
        for bit, run in groupby(pairs, key=lambda p: p[1]):
            ids = [i for i, _ in run]
            text.append(tokenizer.decode(ids), style="bold" if bit else "dim")
        console.print(text)


@click.command()
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--n", "count", default=20, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--phases", default="plan,search,write", show_default=True)
@click.option("--write-style", default="plain", type=click.Choice(["plain", "markdown"]))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@_fail_cleanly
def generate(
    out: Path, count: int, seed: int, phases: str, write_style: str, as_json: bool
) -> None:
    """Write deterministic research trajectories (JSONL): the task world's questions solved."""
    from trainers.tasks import generate as make
    from trainers.trajectory import write_trajectories

    try:
        trajectories = make(count, seed, tuple(phases.split(",")), write_style)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    write_trajectories(out, trajectories)
    if as_json:
        made = {"out": str(out), "count": len(trajectories), "phases": phases.split(",")}
        click.echo(json.dumps(made | {"seed": seed}, indent=2))
    else:
        click.echo(f"wrote {len(trajectories)} trajectories to {out}")


data.add_command(generate)
data.add_command(inspect)
