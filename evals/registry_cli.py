"""`weact benchmark create|list` and `weact eval list`: benchmarks and evaluations in a registry.

Registry clients only (`registry.client` over HTTP, `--url`/`WEACT_URL`, `--token`/
`WEACT_TOKEN`): a table for people, `--json` for scripts, one line on stderr and exit 1 on
an error. A benchmark's dataset digest can be read from a suite directory (`--suite DIR`,
verified against its files first) or given as a sha256.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from clikit.output import Output
from clikit.tables import render_rows
from registry.cli.base import client_command
from registry.client import RegistryClient

METRICS = ("em", "f1", "doc_recall", "plan_coverage", "nll")
LOWER_IS_BETTER = frozenset({"nll"})


def show(out: Output, data: Any, rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> None:
    """`data` as JSON with --json, else `rows` as a table of `columns`."""
    out.show(data, lambda _: render_rows(rows, columns))


def dataset_digest(suite: Path | None, digest: str | None) -> str:
    """The digest of a verified suite directory, or the one given; exactly one of them."""
    if (suite is None) == (digest is None):
        raise click.UsageError("give exactly one of --suite DIR and --dataset-digest SHA256")
    if digest is not None:
        return digest
    from evals.errors import SuiteError
    from evals.manifest import verified_manifest

    try:
        return str(verified_manifest(Path(str(suite)))["digest"])
    except SuiteError as exc:
        raise click.ClickException(str(exc)) from exc


@click.group()
def benchmark() -> None:
    """Define and list the benchmarks the gate checks."""


@benchmark.command("create")
@click.argument("name")
@click.option("--version", "version", type=int, default=1, show_default=True)
@click.option("--suite", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--dataset-digest", "digest", default=None, help="sha256 of the dataset.")
@click.option("--scope", default="library", show_default=True, help="'library' or a capability.")
@click.option("--metric", required=True, type=click.Choice(METRICS))
@click.option(
    "--direction",
    type=click.Choice(["higher", "lower"]),
    default=None,
    help="Better direction (default: lower for nll, else higher).",
)
@click.option("--tolerance", type=float, default=0.02, show_default=True)
@client_command()
def benchmark_create(
    client: RegistryClient,
    out: Output,
    name: str,
    suite: Path | None,
    digest: str | None,
    metric: str,
    direction: str | None,
    **fields: Any,
) -> None:
    """Register benchmark NAME (a new version of it with --version)."""
    created = client.create_benchmark(
        name=name,
        dataset_digest=dataset_digest(suite, digest),
        metric=metric,
        direction=direction or ("lower" if metric in LOWER_IS_BETTER else "higher"),  # type: ignore[arg-type]
        **fields,
    )
    show(out, created, [created], BENCHMARK_COLUMNS)


BENCHMARK_COLUMNS = (
    "name",
    "version",
    "scope",
    "metric",
    "direction",
    "tolerance",
    "dataset_digest",
)


@benchmark.command("list")
@client_command()
def benchmark_list(client: RegistryClient, out: Output) -> None:
    """Every benchmark version."""
    items = client.list_benchmarks()
    rows = [dict(b) for b in items]
    show(out, items, rows, BENCHMARK_COLUMNS)


EVALUATION_COLUMNS = (
    "id",
    "benchmark",
    "benchmark_version",
    "target",
    "score",
    "n",
    "created_by",
    "created_at",
)


def _target(evaluation: Mapping[str, Any]) -> str:
    if evaluation.get("adapter_id") is not None:
        return f"adapter {evaluation['adapter_id']}"
    return f"library {str(evaluation.get('library_digest'))[:12]}"


@click.command("list")
@click.option("--benchmark", "benchmark_name", default=None, help="Only this benchmark.")
@client_command()
def eval_list(client: RegistryClient, out: Output, benchmark_name: str | None) -> None:
    """Evaluations recorded in the registry (who ran them, on what)."""
    items = client.list_evaluations(benchmark=benchmark_name)
    rows = [{**e, "target": _target(e)} for e in items]
    show(out, items, rows, EVALUATION_COLUMNS)
