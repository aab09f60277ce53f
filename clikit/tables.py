"""Tables for people: digest columns shown whole, key/value grids, generic rows.

The registry's own tables (adapters, lineage, revisions, gate reports) are built from these
in `registry/cli/render.py`; this module imports nothing of the project."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table

DIGESTS = {"manifest", "library", "backbone", "root", "digest",
           "dataset_digest", "library_digest"}  # fmt: skip
"""Columns that hold a digest: shown whole, folded (never cut) in a narrow terminal."""


def full(digest: str | None) -> str:
    return digest or "-"


def table(*columns: str, title: str | None = None, caption: str | None = None) -> Table:
    """A table whose digest columns are never cut (`overflow="fold"`, no ellipsis)."""
    made = Table(title=title, caption=caption)
    for column in columns:
        digest = column in DIGESTS
        made.add_column(column, overflow="fold" if digest else "ellipsis", min_width=8)
    return made


def text(value: Any) -> str:
    return "-" if value is None else str(value)


def fields(pairs: Sequence[tuple[str, Any]]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for key, value in pairs:
        grid.add_row(key, text(value))
    return grid


def render_rows(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str], title: str | None = None
) -> Table:
    out = table(*columns, title=title)
    for row in rows:
        out.add_row(*(text(row.get(column)) for column in columns))
    return out
