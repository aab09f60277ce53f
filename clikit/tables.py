"""Tables for people: digests that never fold, key/value grids, generic rows.

A digest in a table or grid is a `Digest`: whole when its column has room for it (a piped
table is wide, see output.py), else its first `SHORT_DIGEST` characters and `…`; never
folded inside the hash, so what a person copies is the digest or a prefix of it, never two
halves. `--json` always holds the whole digest. The registry's own tables (adapters,
lineage, revisions, gate reports) are built from these in `registry/cli/render.py`; this
module imports nothing of the project."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from rich.console import Console, ConsoleOptions
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

SHORT_DIGEST = 12
"""Hex characters of a digest shown when the whole one does not fit (as git's short ids)."""

DIGESTS = {"manifest", "library", "backbone", "root", "digest",
           "dataset_digest", "library_digest"}  # fmt: skip
"""Columns that hold a digest."""

_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")


class Digest:
    """A digest cell: whole if the column is wide enough, else shortened; never folded."""

    def __init__(self, value: str) -> None:
        self.value = value

    def __str__(self) -> str:
        return self.value

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(min(len(self.value), SHORT_DIGEST + 1), len(self.value))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        whole = len(self.value) <= options.max_width
        shown = self.value if whole else self.value[:SHORT_DIGEST] + "…"
        yield Text(shown, no_wrap=True, overflow="crop")


def full(digest: str | None) -> Digest | str:
    """A digest for a table cell (`Digest`), or `-` when there is none."""
    return Digest(digest) if digest else "-"


def table(*columns: str, title: str | None = None, caption: str | None = None) -> Table:
    """A table whose headers are never cut and whose digest cells never fold."""
    made = Table(title=title, caption=caption)
    for column in columns:
        made.add_column(column, overflow="ellipsis", min_width=min(len(column), 8))
    return made


def text(value: Any) -> str:
    return "-" if value is None else str(value)


def cell(value: Any) -> Digest | str:
    """A value for a cell: a `Digest` for a 64-hex digest, else its text."""
    if isinstance(value, str) and _HEX_DIGEST.fullmatch(value):
        return Digest(value)
    return text(value)


def fields(pairs: Sequence[tuple[str, Any]]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for key, value in pairs:
        grid.add_row(key, cell(value))
    return grid


def render_rows(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str], title: str | None = None
) -> Table:
    out = table(*columns, title=title)
    for row in rows:
        out.add_row(*(cell(row.get(column)) for column in columns))
    return out
