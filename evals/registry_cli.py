"""`weact benchmark create|list` and `weact eval list`: benchmarks and evaluations in a registry.

Registry clients only (`registry.client` over HTTP, `--url`/`WEACT_URL`, `--token`/
`WEACT_TOKEN`): a table for people, `--json` for scripts, one line on stderr and exit 1 on
an error. A benchmark's dataset digest can be read from a suite directory (`--suite DIR`,
verified against its files first) or given as a sha256.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
import httpx

from registry.client import RegistryClient
from registry.errors import RegistryError

DEFAULT_URL = "http://127.0.0.1:8000"
METRICS = ("em", "f1", "doc_recall", "plan_coverage", "nll")
LOWER_IS_BETTER = frozenset({"nll"})

F = TypeVar("F", bound=Callable[..., Any])


def registry_command(fn: F) -> F:
    """Add --url/--token/--json; call `fn(client=, as_json=, ...)`; errors become one line."""

    @click.option("--url", envvar="WEACT_URL", default=DEFAULT_URL, show_default=True)
    @click.option("--token", envvar="WEACT_TOKEN", default=None, help="Bearer token.")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
    @functools.wraps(fn)
    def wrapper(url: str, token: str | None, **kwargs: Any) -> Any:
        try:
            with RegistryClient(url, token) as client:
                return fn(client=client, **kwargs)
        except RegistryError as exc:
            raise click.ClickException(f"{exc.code}: {exc.detail}") from exc
        except httpx.HTTPError as exc:
            raise click.ClickException(f"cannot reach the registry at {url}: {exc}") from exc

    return wrapper  # type: ignore[return-value]


def show(
    data: Any, as_json: bool, rows: Sequence[Mapping[str, Any]], columns: Sequence[str]
) -> None:
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(*columns)
    for row in rows:
        table.add_row(*("-" if row.get(c) is None else str(row.get(c)) for c in columns))
    Console().print(table)


def dataset_digest(suite: Path | None, digest: str | None) -> str:
    """The digest of a verified suite directory, or the one given; exactly one of them."""
    if (suite is None) == (digest is None):
        raise click.UsageError("give exactly one of --suite DIR and --dataset-digest SHA256")
    if digest is not None:
        return digest
    from evals.errors import SuiteError
    from evals.suite import verified_manifest

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
@registry_command
def benchmark_create(
    client: RegistryClient,
    as_json: bool,
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
    show(created, as_json, [created], BENCHMARK_COLUMNS)


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
@registry_command
def benchmark_list(client: RegistryClient, as_json: bool) -> None:
    """Every benchmark version."""
    items = client.list_benchmarks()
    rows = [{**b, "dataset_digest": str(b["dataset_digest"])[:12]} for b in items]
    show(items, as_json, rows, BENCHMARK_COLUMNS)


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
@registry_command
def eval_list(client: RegistryClient, as_json: bool, benchmark_name: str | None) -> None:
    """Evaluations recorded in the registry (who ran them, on what)."""
    items = client.list_evaluations(benchmark=benchmark_name)
    rows = [{**e, "target": _target(e)} for e in items]
    show(items, as_json, rows, EVALUATION_COLUMNS)
