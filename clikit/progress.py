"""Progress of long steps on stderr, for every `weact` command and the code they run.

Shown when stderr is a terminal, or when `WEACT_PROGRESS=1` forces it (a log file, a CI job,
a test); `WEACT_PROGRESS=0` silences it. It never goes to stdout, so `--json` output stays one
parseable document. Two shapes:

- `steps(label, total)`: a few named steps (a conversion, a merge, a library install), one
  line each as it begins, with the time so far and, from the second step, an estimate of
  what is left (the mean step so far times the steps left):
  `merge ties: step 2/4 read b (1.2 s, ETA 3.6 s)`, then `merge ties: done in 3.1 s`.
  `timing(started, done, total)` words the same for other progress (training steps).
- `transfer_progress(description)`: bytes of a blob transfer (push, pull): a rich bar on a
  terminal, a line per finished blob when forced elsewhere.

Library code never calls them: a library function that has long steps takes a `steps`
callback of this shape (`pull_library(..., steps=steps)`, `merge_adapters(..., steps=steps)`,
`smollm2_dir(steps=steps)`), silent when not given, and a transfer takes a byte callback
(`RegistryClient.push_adapter(..., progress=...)`); the CLI modules pass these. It imports
nothing of the project.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

PROGRESS_ENV = "WEACT_PROGRESS"
ON = ("1", "true", "yes", "on")
OFF = ("0", "false", "no", "off")

Step = Callable[[str], None]
"""Called with a step's name as it begins."""

ProgressCallback = Callable[[int, int], None]
"""Called with the bytes done and the total (0 when unknown) as a transfer goes."""


def progress_enabled() -> bool:
    """Whether progress is shown: `WEACT_PROGRESS` when set, else whether stderr is a tty."""
    forced = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if forced in ON:
        return True
    if forced in OFF:
        return False
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def _line(text: str) -> None:
    click.echo(text, err=True)


def _seconds(s: float) -> str:
    if s < 60:
        return f"{s:.1f} s"
    minutes, seconds = divmod(int(round(s)), 60)
    return (
        f"{minutes} min {seconds:02d} s"
        if minutes < 60
        else f"{minutes // 60} h {minutes % 60:02d} min"
    )


def timing(started: float, done: int, total: int | None) -> str:
    """`1.2 s, ETA 3.6 s`: the time since `started` (`time.monotonic()`), and when `done`
    of `total` units are finished, the mean unit so far times those left (none before the
    first unit is done, or when the total is unknown)."""
    elapsed = time.monotonic() - started
    if not done or not total or done >= total:
        return _seconds(elapsed)
    return f"{_seconds(elapsed)}, ETA {_seconds(elapsed / done * (total - done))}"


@contextmanager
def steps(label: str, total: int) -> Iterator[Step]:
    """A `Step` that writes `label: step i/total name` as each step begins, and
    `label: done in S s` when the block ends without an error; silent when not enabled."""
    if not progress_enabled():
        yield lambda name: None
        return
    count = 0
    started = time.monotonic()

    def step(name: str) -> None:
        nonlocal count
        count += 1
        _line(f"{label}: step {count}/{total} {name} ({timing(started, count - 1, total)})")

    yield step
    _line(f"{label}: done in {time.monotonic() - started:.1f} s")


@contextmanager
def transfer_progress(description: str) -> Iterator[ProgressCallback | None]:
    """Bytes of a transfer: a rich bar on a terminal stderr, a line per blob when forced
    elsewhere, None (no reporting) when not enabled."""
    from rich.console import Console
    from rich.filesize import decimal

    if not progress_enabled():
        yield None
        return
    console = Console(stderr=True)
    if not console.is_terminal:

        def finished(done: int, total: int) -> None:
            if total and done >= total:  # a blob of unknown length stays silent
                _line(f"{description}: {decimal(done)}")

        yield finished
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn())
    with Progress(*columns, TransferSpeedColumn(), console=console, transient=True) as progress:
        task = progress.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total or None)

        yield update
