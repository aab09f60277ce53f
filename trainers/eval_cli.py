"""`weact eval nll`: masked NLL per capability on held-out phase samples, optionally posted.

weact eval nll --backbone PATH --adapter NAME=DIR ... --data FILE [--json]
               [--post BENCHMARK[@V] --adapter-id ID|--library-digest D [--registry URL] --token T]

Mounted in the `weact eval` group by `evals.cli`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from clikit.options import token_option
from registry.client.url_cli import registry_url_option
from trainers.cli import _fail_cleanly, parse_adapters
from trainers.errors import NoSamplesError


@click.command()
@click.option("--backbone", required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--adapter", "adapters", multiple=True, help="CAPABILITY=DIR, or *=DIR for all.")
@click.option(
    "--data", "data", multiple=True, required=True, type=click.Path(exists=True, path_type=Path)
)
@click.option("--json", "as_json", is_flag=True)
@click.option("--post", "post", default=None, help="Post to the registry as BENCHMARK[@VERSION].")
@click.option("--adapter-id", type=int, default=None, help="--post: the adapter scored.")
@click.option("--library-digest", default=None, help="--post: the library scored.")
@click.option("--dataset-digest", default=None, help="--post: the benchmark's dataset digest.")
@registry_url_option(help="--post: the registry.")
@token_option(help="--post: an evaluator token.")
@_fail_cleanly
def nll(
    backbone: Path,
    adapters: tuple[str, ...],
    data: tuple[Path, ...],
    as_json: bool,
    **post: Any,
) -> None:
    """Masked NLL per capability on held-out phase samples (no adapter: the bare backbone)."""
    from trainers.evaluate import evaluate_nll
    from trainers.training import quiet_libraries, read_samples

    if post["post"]:
        _check_post(post)
    quiet_libraries()
    assignment: dict[str, Path | None] = dict(parse_adapters(adapters))
    default = assignment.pop("*", None)
    samples = read_samples(list(data), backbone, None)
    if not samples:
        raise NoSamplesError("no phase samples in the data")
    scores = evaluate_nll(
        backbone=backbone, samples=samples, assignment=assignment, default=default
    )
    if post["post"]:
        _post_nll(scores, list(data), post)
    if as_json:
        click.echo(json.dumps([s.to_json() for s in scores.values()], indent=2))
        return
    _table(scores)


def _check_post(opts: dict[str, Any]) -> None:
    """Usage errors of --post, before any model is loaded."""
    from trainers.post_eval import parse_benchmark

    try:
        parse_benchmark(opts["post"])
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    if (opts["adapter_id"] is None) == (opts["library_digest"] is None):
        raise click.UsageError("--post needs exactly one of --adapter-id and --library-digest")
    from registry.client import RegistryClient
    from trainers.post_eval import find_benchmark

    with RegistryClient(opts["registry_url"], opts["token"]) as client:  # answers, knows it
        find_benchmark(client, *parse_benchmark(opts["post"]))


def _post_nll(scores: dict[str, Any], data: list[Path], opts: dict[str, Any]) -> None:
    from registry.client import RegistryClient
    from trainers.post_eval import post_nll

    with RegistryClient(opts["registry_url"], opts["token"]) as client:
        posted = post_nll(
            client,
            benchmark=opts["post"],
            scores=scores,
            data=data,
            adapter_id=opts["adapter_id"],
            library_digest=opts["library_digest"],
            dataset_digest=opts["dataset_digest"],
        )
    click.echo(f"posted evaluation {posted['id']} of {posted['benchmark']}", err=True)


def _table(scores: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("capability", "adapter", "samples", "tokens", "masked NLL")
    for s in scores.values():
        table.add_row(
            s.capability, s.adapter or "(backbone)", str(s.samples), str(s.tokens), f"{s.mean:.4f}"
        )
    Console().print(table)
