"""Results for people (rich tables) or scripts (`--json`); progress is `progress.py`'s."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

import click
from rich.console import Console, RenderableType

PIPED_WIDTH = 400
"""Columns of a table written to a pipe or file (rich's default there is 80, which cut
digests); `$COLUMNS` still wins."""


def stdout_console() -> Console:
    """The console for results: the terminal's width, or wide when piped (a table never
    cuts a digest: digest columns fold in a narrow terminal instead, see tables.py)."""
    piped = not sys.stdout.isatty() and not os.environ.get("COLUMNS")
    return Console(width=PIPED_WIDTH if piped else None)


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
            self.console.print(render(data))
