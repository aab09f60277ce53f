"""`weact demo`: the step lists, `run_demo` and the click command."""

from __future__ import annotations

import importlib.util
import json
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import click
import httpx

from cli.demo.harness import Demo, Step, console, run_steps
from cli.demo.product_steps import PRODUCT_STEPS
from cli.demo.registry_steps import REGISTRY_STEPS, VERIFY
from registry import errors
from runtime.errors import RuntimeEngineError
from trainers.errors import TrainerError

STEPS: list[Step] = [*REGISTRY_STEPS, *PRODUCT_STEPS, VERIFY]
"""Every step: the registry lifecycle, training, a runtime node, the audit chain."""
PLAIN_STEPS: list[Step] = [*REGISTRY_STEPS, VERIFY]
"""Without torch (`--plain`): the registry lifecycle and the audit chain."""

DEMO_ERRORS = (
    errors.RegistryError,
    httpx.HTTPError,
    RuntimeError,
    OSError,
    RuntimeEngineError,
    TrainerError,
)


def run_demo(
    workdir: Path, steps: Sequence[Step] | None = None, *, plain_weights: bool = False
) -> Demo:
    """Run `steps` (default: STEPS, PLAIN_STEPS with `plain_weights`) in order, printing each."""
    if steps is None:
        steps = PLAIN_STEPS if plain_weights else STEPS
    return run_steps(Demo(workdir=workdir, plain_weights=plain_weights), steps)


def torch_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "peft"))


@click.command()
@click.option("--keep", is_flag=True, help="Keep the temp directory (registry, weights).")
@click.option("--plain", is_flag=True, help="Registry steps only, weights built without torch.")
@click.option(
    "--json", "as_json", is_flag=True, help="The steps on stderr; a JSON summary on stdout."
)
def demo(keep: bool, plain: bool, as_json: bool) -> None:
    """Run the end-to-end demo on embedded defaults."""
    if as_json:
        console.file = sys.stderr  # the narrative; stdout is the summary
    # Warnings only; configured first, so that libraries (mcp) cannot raise it to INFO.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not plain and not torch_available():
        console.print("torch/peft not installed: running the registry steps only (--plain)")
        plain = True
    workdir = Path(tempfile.mkdtemp(prefix="weact-demo-"))
    started = time.perf_counter()
    try:
        done = run_demo(workdir, plain_weights=plain)
    except DEMO_ERRORS as exc:
        raise click.ClickException(f"demo failed: {exc}") from exc
    finally:
        if keep:
            console.print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    seconds = time.perf_counter() - started
    console.print(f"[bold green]demo done in {seconds:.1f} s[/bold green]")
    if as_json:
        summary = {
            "seconds": round(seconds, 2),
            "plain": plain,
            "workdir": str(workdir) if keep else None,
            "revisions": done.revisions,
        }
        click.echo(json.dumps(summary, indent=2))
