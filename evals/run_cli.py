"""`weact eval run`: a suite split through the agent loop for a library; scored; posted.

weact eval run --suite DIR --backbone PATH|smollm2 --adapter CAP=DIR ... --results FILE
               [--policy hard|soft|choice] [--split test] [--limit N] [--concurrency 4]
               [--max-new-tokens 96] [--max-steps 12] [--engine peft|vllm] [--runtime-switches]
               [--max-phase-steps N] [--max-episode-tokens N]
               [--post --registry URL --token T (--library-digest D | --adapter-id CAP=ID ...)]

Resumable: the same --results file continues an interrupted run. The run is keyed by the
library digest when given, else by the manifest roots of the adapter directories.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from clikit.errors import fail_cleanly
from clikit.options import token_option
from evals.engines import close_engine, library_key, make_engine
from evals.errors import EvalError
from evals.scoring import METRICS
from registry.client.url_cli import registry_url_option
from registry.errors import RegistryError
from storage.errors import StorageError


def _pairs(specs: Sequence[str], what: str) -> dict[str, str]:
    out = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name or not value:
            raise click.BadParameter(f"{spec!r}: expected CAPABILITY=VALUE", param_hint=what)
        out[name] = value
    return out


def summarize(results: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Mean of every metric per question kind and over all ("all")."""
    groups: dict[str, list[Any]] = defaultdict(list)
    for result in results.values():
        groups[result.score.kind].append(result.score)
        groups["all"].append(result.score)
    return {
        kind: {
            "n": len(scores),
            **{m: sum(s.metric(m) for s in scores) / len(scores) for m in METRICS},
        }
        for kind, scores in sorted(groups.items())
    }


def _print(summary: Mapping[str, Mapping[str, float]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("kind", "n", *METRICS)
    for kind, row in summary.items():
        table.add_row(kind, str(int(row["n"])), *(f"{row[m]:.3f}" for m in METRICS))
    Console().print(table)


def _check_registry(options: dict[str, Any], suite_digest: str) -> None:
    """The registry answers and defines at least one benchmark on this suite."""
    from evals.post import suite_benchmarks
    from registry.client import RegistryClient

    with RegistryClient(options["registry_url"], options["token"]) as client:
        if not suite_benchmarks(client, suite_digest):
            raise click.UsageError(
                f"--post: the registry defines no benchmark on suite {suite_digest[:12]}; "
                "create one with `weact benchmark create --suite DIR`"
            )


def _post(options: dict[str, Any], suite: Any, results: Mapping[str, Any], key: str) -> list[Any]:
    from evals.post import post_results
    from registry.client import RegistryClient
    from trainers.publish import code_version

    pairs = _pairs(options["adapter_ids"], "--adapter-id")
    provenance = {
        "engine": options["engine"],
        "policy": options["policy"],
        "code_version": code_version(),
        "extra": {"split": options["split"], "library_key": key, "limit": options["limit"]},
    }
    with RegistryClient(options["registry_url"], options["token"]) as client:
        ids = {cap: client.resolve_adapter(v) for cap, v in pairs.items()}
        return post_results(
            client,
            suite_digest=suite.digest,
            results=results,
            library_digest=options["library_digest"],
            adapters=ids,
            provenance=provenance,
        )


@click.command("run")
@click.option(
    "--suite", "suite_dir", required=True, type=click.Path(file_okay=False, path_type=Path)
)
@click.option("--backbone", required=True, help="Backbone directory, or 'smollm2'.")
@click.option("--adapter", "adapters", multiple=True, help="CAPABILITY=DIR (repeat).")
@click.option(
    "--results",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="JSONL of the finished items; the same command again resumes it. A file of another "
    "run (suite, split, library, policy, backbone weights or episode caps) is refused.",
)
@click.option(
    "--policy",
    type=click.Choice(["hard", "soft", "choice"]),
    default="hard",
    show_default=True,
    help="choice: the soft policy, its moves decoded under a constraint.",
)
@click.option(
    "--split", type=click.Choice(["train", "dev", "test"]), default="test", show_default=True
)
@click.option("--limit", type=int, default=None, help="Only the first N questions.")
@click.option("--concurrency", type=int, default=4, show_default=True)
@click.option("--engine", type=click.Choice(["peft", "vllm"]), default="peft", show_default=True)
@click.option(
    "--runtime-switches",
    is_flag=True,
    help="Hard policy: the runtime switches between phases (no bare-backbone turns).",
)
@click.option(
    "--max-phase-steps",
    type=click.IntRange(min=1),
    default=None,
    help="With --runtime-switches: generations per phase before the runtime moves on.",
)
@click.option(
    "--max-episode-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="Tokens the model may generate in one episode (default: no limit beyond the steps).",
)
@click.option("--max-new-tokens", type=int, default=96, show_default=True)
@click.option("--max-steps", type=int, default=12, show_default=True)
@click.option("--post", "do_post", is_flag=True, help="Post one evaluation per suite benchmark.")
@registry_url_option(help="--post: the registry.")
@token_option(help="--post: an evaluator token.")
@click.option("--library-digest", default=None, help="The library evaluated (library benchmarks).")
@click.option(
    "--adapter-id",
    "adapter_ids",
    multiple=True,
    help="CAPABILITY=ID or CAPABILITY=CAP@VERSION (capability benchmarks).",
)
@click.option("--json", "as_json", is_flag=True)
@fail_cleanly(RegistryError, StorageError, EvalError)
def run(
    suite_dir: Path, backbone: str, adapters: tuple[str, ...], results: Path, **options: Any
) -> None:
    """Run a suite split through the agent loop for a library; score it; resume; post."""
    from evals.runner import EpisodeSettings, run_suite
    from evals.suite import load_suite

    library = _pairs(adapters, "--adapter")
    suite = load_suite(suite_dir)
    if options["do_post"]:
        _check_registry(options, suite.digest)  # before any model is loaded
    key = options["library_digest"] or library_key(library)
    from clikit.progress import steps

    engine = make_engine(backbone, library, options["engine"], options["concurrency"], steps=steps)
    settings = EpisodeSettings(
        runtime_switches=options["runtime_switches"],
        max_phase_steps=options["max_phase_steps"],
        max_episode_tokens=options["max_episode_tokens"],
        policy=options["policy"],
        max_steps=options["max_steps"],
        max_new_tokens=options["max_new_tokens"],
        concurrency=options["concurrency"],
    )
    try:
        from storage.manifest import manifest_of_path

        weights = manifest_of_path(engine.backbone_dir).root  # what the results file names
        with _progress(len(suite.questions[options["split"]][: options["limit"]])) as tick:
            settings.on_item = tick
            out = run_suite(
                engine, suite, results=results, library=key, backbone=weights,
                split=options["split"], limit=options["limit"], settings=settings,
            )  # fmt: skip
    finally:
        close_engine(engine)
    summary = summarize(out)
    posted = _post(options, suite, out, key) if options["do_post"] else []
    if options["as_json"]:
        click.echo(json.dumps({"summary": summary, "posted": [p["id"] for p in posted]}, indent=2))
    else:
        _print(summary)
        for p in posted:
            click.echo(f"posted evaluation {p['id']} of {p['benchmark']}", err=True)


def _progress(total: int) -> Any:
    from contextlib import contextmanager

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    @contextmanager
    def bar() -> Any:
        columns = (TextColumn("episodes"), BarColumn(), MofNCompleteColumn())
        with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
            task = progress.add_task("episodes", total=total)
            yield lambda _result: progress.advance(task)

    return bar()
