"""`weact train`, `weact merge`, `weact eval`: the trainers' commands (mounted lazily).

weact train --capability C --data FILE --backbone PATH --out DIR [--adapter NAME=DIR ...]
            [--rank --alpha --targets --lr --epochs --batch --seed] [--init DIR]
            [--publish [--registry URL] --token T [--parent ID] [--label L] [--allow-replay]
             [--key K]]
weact train --shared [--sequential] --data FILE --backbone PATH --out DIR   (baseline)
weact data inspect FILE --backbone PATH [--capability C] [--json]
weact data generate OUT [--n N] [--seed S] [--phases plan,search,write] [--write-style]
(`weact train inspect|generate|publish`: old spellings, hidden, one release; a trained
directory is published by `weact train --publish` or `weact adapter push`)
weact merge --method linear|ties|dare_ties --adapter [NAME=]DIR ... --out DIR
weact eval nll ...                            (trainers/eval_cli.py)

The registry is `--registry`, else `$WEACT_URL`, as for every `weact` command
(`clikit.options`). With `--publish` it is asked for the capability (and the parent)
before training starts, so a registry that does not answer, or a capability it does not
know, costs no training. Under `torchrun` or `accelerate launch` the same command trains
data-parallel (`trainers.distributed`): rank 0 alone checks the registry, writes `--out`,
prints and publishes; the other ranks exit 0 silently once it has saved. Failures are one
line on stderr (`clikit.errors`); progress goes to stderr (`clikit.progress`), passed to the
library code as its callbacks.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from clikit.errors import fail_cleanly
from clikit.options import hidden_alias, token_option
from registry.client.url_cli import registry_url_option
from registry.errors import RegistryError
from storage.errors import StorageError
from trainers.data_cli import generate, inspect
from trainers.errors import AdapterSpecError, TrainerError
from trainers.merge import METHODS as MERGE_METHODS

logger = logging.getLogger(__name__)


_fail_cleanly = fail_cleanly(RegistryError, StorageError, TrainerError)
"""Typed errors (the trainers', the registry client's, storage's) -> one line, exit 1."""


def parse_adapters(specs: Sequence[str], *, named: bool = True) -> dict[str, Path]:
    """`NAME=DIR` options as {name: dir}; without `named`, a bare DIR is named after itself."""
    out: dict[str, Path] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            if named:
                raise AdapterSpecError(f"--adapter {spec!r}: expected NAME=DIR")
            name, path = Path(spec).name, spec
        if not name or not path:
            raise AdapterSpecError(f"--adapter {spec!r}: expected NAME=DIR")
        if name in out:
            raise AdapterSpecError(f"--adapter {name!r} given twice")
        if not (Path(path) / "adapter_config.json").is_file():
            raise AdapterSpecError(f"--adapter {name}={path}: no adapter_config.json there")
        out[name] = Path(path)
    return out


@contextmanager
def _progress(label: str) -> Iterator[Callable[[int, int, float], None]]:
    """Training steps on stderr (`clikit.progress`): a bar with the loss, elapsed time and
    ETA on a terminal (`loss -` until the first step ends), a line per step when forced
    elsewhere (`WEACT_PROGRESS=1`), nothing otherwise."""
    import time

    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from clikit.progress import progress_enabled, timing

    console = Console(stderr=True)
    if not progress_enabled():
        yield lambda step, total, loss: None
        return
    started = time.monotonic()
    if not console.is_terminal:
        yield lambda step, total, loss: click.echo(
            f"{label}: step {step}/{total} loss {loss:.4f} ({timing(started, step, total)})",
            err=True,
        )
        return
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn()]
    columns += [TextColumn("loss {task.fields[loss]}"), TimeElapsedColumn()]
    columns += [TextColumn("ETA"), TimeRemainingColumn()]
    with Progress(*columns, transient=False, console=console) as progress:
        task = progress.add_task(label, total=None, loss="-")

        def on_step(step: int, total: int, loss: float) -> None:
            progress.update(task, completed=step, total=total, loss=f"{loss:.4f}")

        yield on_step


def _registry_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        registry_url_option(help="Registry to publish to."),
        token_option(help="Publisher token."),
        click.option(
            "--parent", metavar="ADAPTER", help="Parent version, write@2 (an update); or #ID."
        ),
        click.option("--label", help="Version label, e.g. write++."),
        click.option("--allow-replay", is_flag=True, help="Publish anyway, recording replay."),
        click.option(
            "--key",
            "key_file",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="The publisher's private key: sign the version's identity, as "
            "`weact adapter push --key` does (signed trust).",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _publish(directory: Path, capability: str, opts: dict[str, Any]) -> dict[str, Any]:
    from clikit.progress import transfer_progress
    from registry.client import RegistryClient
    from registry.trust import load_signer
    from trainers.publish import publish_adapter

    key_file = opts.get("key_file")
    signer = load_signer(key_file) if key_file else None
    with (
        RegistryClient(opts["registry_url"], opts["token"]) as client,
        transfer_progress(f"publish {directory.name}") as progress,
    ):
        adapter = publish_adapter(
            directory,
            client=client,
            capability=capability,
            parent_id=client.resolve_adapter(opts["parent"]) if opts.get("parent") else None,
            label=opts.get("label"),
            allow_replay=bool(opts.get("allow_replay")),
            progress=progress,
            signer=signer,
        )
    return dict(adapter)


def _check_publishable(capability: str, opts: dict[str, Any]) -> None:
    """Before any training: the key reads, the registry answers, knows the capability (and
    the parent), and takes the push unsigned only when it is not strict."""
    from registry.client import RegistryClient
    from registry.errors import UntrustedError
    from registry.trust import load_signer

    if opts.get("key_file"):
        load_signer(opts["key_file"])
    with RegistryClient(opts["registry_url"], opts["token"]) as client:
        client.get_capability(capability)
        if opts.get("parent") is not None:
            client.adapter_by_name(opts["parent"])
        if not opts.get("key_file") and client.get_trust()["strict"]:
            raise UntrustedError("this registry is strict: sign the push (--key)")


@click.group(invoke_without_command=True, subcommand_metavar="")
@click.option("--capability", help="The capability whose adapter is trained.")
@click.option("--shared", is_flag=True, help="Baseline: one LoRA on every phase.")
@click.option("--sequential", is_flag=True, help="With --shared: one capability after another.")
@click.option(
    "--per-trajectory",
    is_flag=True,
    help="With --shared: each step takes --batch whole trajectories (every phase, one forward).",
)
@click.option(
    "--data",
    "data",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="Trajectories (JSONL; repeat).",
)
@click.option(
    "--backbone",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Backbone directory (safetensors + tokenizer).",
)
@click.option("--adapter", "adapters", multiple=True, help="Frozen adapter NAME=DIR (repeat).")
@click.option(
    "--init",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Start from this adapter's weights (an update, e.g. write -> write++).",
)
@click.option("--rank", default=8, show_default=True)
@click.option("--alpha", default=16, show_default=True)
@click.option("--targets", default="q_proj,k_proj,v_proj,o_proj", show_default=True)
@click.option("--lr", default=1e-3, show_default=True)
@click.option("--epochs", default=1, show_default=True)
@click.option(
    "--batch",
    type=int,
    help="Samples per optimizer step, over every process  [default: one per process]",
)
@click.option("--seed", default=0, show_default=True)
@click.option(
    "--dtype",
    type=click.Choice(["float32", "bfloat16"]),
    default="float32",
    show_default=True,
    help="The frozen backbone's dtype while training (LoRA weights stay fp32).",
)
@click.option("--out", type=click.Path(path_type=Path), help="Output adapter directory.")
@click.option("--publish", "do_publish", is_flag=True, help="Publish to the registry after.")
@_registry_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
@_fail_cleanly
def train(ctx: click.Context, /, **opts: Any) -> None:
    """Phase-wise LoRA training of one capability (or a baseline), then optionally publish."""
    if ctx.invoked_subcommand is not None:
        return
    from trainers.distributed import detect

    _check_train_options(opts)
    world = detect()
    settings = _settings(opts, world.size)
    if opts["do_publish"] and world.main:
        _check_publishable(opts["capability"], opts)
    from trainers.training import SHARED, train_from_files

    cap = opts["capability"]
    name = SHARED if opts["shared"] else cap
    frozen = parse_adapters(opts["adapters"])
    with _progress(f"train {name}") as on_step:
        trained_run = train_from_files(
            data=list(opts["data"]),
            backbone=opts["backbone"],
            out=opts["out"],
            capability=None if opts["shared"] else cap,
            settings=settings,
            frozen=frozen,
            init=opts["init"],
            sequential=opts["sequential"],
            on_step=on_step,
            world=world,
        )
    if not world.main:
        return
    result, samples = trained_run.result, trained_run.samples
    adapter = _publish(result.out, cap or SHARED, opts) if opts["do_publish"] else None
    if opts["as_json"]:
        trained = {"adapter": name, "samples": samples, "losses": list(result.losses)}
        trained |= {"frozen_roots": dict(result.roots), "out": str(result.out)}
        click.echo(json.dumps({**trained, "published": adapter}, indent=2))
        return
    click.echo(f"{name}: {samples} samples, loss {result.losses[0]:.4f} -> {result.losses[-1]:.4f}")
    click.echo(f"frozen roots unchanged: {', '.join(sorted(result.roots))}")
    click.echo(f"saved {result.out}")
    if adapter is not None:
        click.echo(f"published {adapter['name']} (id {adapter['id']}, state {adapter['state']})")


def _settings(opts: dict[str, Any], world_size: int) -> Any:
    from trainers.lora import LoraSettings

    batch = world_size if opts["batch"] is None else opts["batch"]
    if 1 <= batch < world_size:
        raise click.UsageError(
            f"--batch {batch}: fewer samples per step than processes ({world_size})"
        )
    try:
        return LoraSettings(
            rank=opts["rank"],
            alpha=opts["alpha"],
            targets=tuple(t for t in opts["targets"].split(",") if t),
            lr=opts["lr"],
            epochs=opts["epochs"],
            seed=opts["seed"],
            dtype=opts["dtype"],
            batch=batch,
            per_trajectory=opts["per_trajectory"],
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc


def _check_train_options(opts: dict[str, Any]) -> None:
    missing = [k for k in ("data", "backbone", "out") if not opts[k]]
    if not opts["shared"] and not opts["capability"]:
        missing.insert(0, "capability")
    if missing:
        raise click.UsageError("missing " + ", ".join(f"--{m}" for m in missing))
    for flag in ("sequential", "per_trajectory"):
        if opts[flag] and not opts["shared"]:
            raise click.UsageError(f"--{flag.replace('_', '-')} goes with --shared")
    if opts["sequential"] and opts["per_trajectory"]:
        raise click.UsageError("--sequential and --per-trajectory: steps of whole trajectories "
                               "mix capabilities")  # fmt: skip
    if opts["do_publish"] and not opts["capability"]:
        raise click.UsageError("--publish needs --capability (the registry capability)")


@click.command("publish")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--capability", required=True)
@_registry_options
@click.option("--json", "as_json", is_flag=True, help="Print the adapter version as JSON.")
@_fail_cleanly
def publish_cmd(directory: Path, capability: str, as_json: bool, **opts: Any) -> None:
    """Publish an adapter trained by `weact train` (provenance from its training.json)."""
    adapter = _publish(directory, capability, opts)
    if as_json:
        click.echo(json.dumps(adapter, indent=2))
    else:
        click.echo(f"published {adapter['name']} (id {adapter['id']}, state {adapter['state']})")


@click.command()
@click.option("--method", required=True, type=click.Choice(list(MERGE_METHODS)))
@click.option("--adapter", "adapters", multiple=True, required=True, help="[NAME=]DIR (repeat).")
@click.option("--weight", "weights", multiple=True, type=float, help="One per adapter.")
@click.option("--density", default=0.5, show_default=True, help="ties / dare_ties: kept fraction.")
@click.option("--seed", default=0, show_default=True, help="dare_ties: random drop seed.")
@click.option("--rank", type=int, help="ties / dare_ties: SVD rank (default: sum of ranks).")
@click.option("--out", required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@_fail_cleanly
def merge(
    method: str, adapters: tuple[str, ...], weights: tuple[float, ...], as_json: bool, **opts: Any
) -> None:
    """Static-merge baselines: Full Additive (linear), TIES, DARE-TIES into one PEFT adapter."""
    from clikit.progress import steps
    from trainers.merge import MergeSpec, merge_adapters

    paths = list(parse_adapters(adapters, named=False).values())
    spec = MergeSpec(method, tuple(weights) or None, opts["density"], opts["seed"], opts["rank"])
    out = merge_adapters(paths, opts["out"], spec, steps=steps)
    if as_json:
        merged = {"method": method, "adapters": [str(p) for p in paths], "out": str(out)}
        click.echo(json.dumps(merged, indent=2))
    else:
        click.echo(f"merged {len(paths)} adapters ({method}) into {out}")


for _old, _new in (
    (generate, "weact data generate"),
    (inspect, "weact data inspect"),
    (publish_cmd, "weact adapter push"),
):
    train.add_command(hidden_alias(_old, _new))
