"""Results for people (rich tables) or scripts (`--json`); progress is `progress.py`'s."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from typing import Any

import click
from rich.console import Console, RenderableType
from rich.text import Text

PIPED_WIDTH = 400
"""Columns of a table written to a pipe or file (rich's default there is 80, which cut
digests); `$COLUMNS` still wins."""


def stdout_console() -> Console:
    """The console for results: the terminal's width, or wide when piped (a table never
    cuts a digest: digest columns fold in a narrow terminal instead, see tables.py)."""
    piped = not sys.stdout.isatty() and not os.environ.get("COLUMNS")
    return Console(width=PIPED_WIDTH if piped else None)


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """While it lasts, whatever writes to stdout goes to stderr: Python's `sys.stdout` and
    file descriptor 1 (an engine's logging handler made at import, its subprocesses, C
    code), so that a command's stdout holds only its result (`--json` parses)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


class Output:
    """Prints results: JSON on stdout with `--json`, rich renderables otherwise; a
    mutation's result as one confirmation line unless `verbose` (`-v`) or `--json`."""

    def __init__(self, as_json: bool, verbose: bool = False) -> None:
        self.as_json = as_json
        self.verbose = verbose
        self.console = stdout_console()

    def confirm(
        self,
        data: Any,
        line: Callable[[Any], RenderableType],
        render: Callable[[Any], RenderableType],
    ) -> None:
        """What a mutation did: `line(data)` (one line), the record with `--json` or `-v`."""
        self.show(data, render if self.verbose else line)

    def show(self, data: Any, render: Callable[[Any], RenderableType]) -> None:
        if self.as_json:
            click.echo(json.dumps(data, indent=2, sort_keys=True))
        else:
            shown = render(data)
            # a line of text is never folded (a digest or a date copied from it stays whole)
            self.console.print(shown, soft_wrap=isinstance(shown, str | Text))
