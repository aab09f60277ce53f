"""Digests in tables: whole when there is room, shortened to SHORT_DIGEST, never folded."""

from __future__ import annotations

from rich.console import Console

from clikit.tables import SHORT_DIGEST, fields, full, table

DIGEST = "0123456789abcdef" * 4


def shown(renderable: object, width: int) -> list[str]:
    console = Console(width=width, record=True)
    console.print(renderable)
    return [line.rstrip() for line in console.export_text().splitlines()]


def test_a_digest_is_whole_when_it_fits_and_short_when_it_does_not() -> None:
    made = table("id", "name", "manifest", "by")
    made.add_row("6", "write@2", full(DIGEST), "alice")
    assert any(DIGEST in line for line in shown(made, 120))
    narrow = shown(made, 60)
    assert any(DIGEST[:SHORT_DIGEST] + "…" in line for line in narrow)
    assert max(map(len, narrow)) <= 60
    assert not any(DIGEST[SHORT_DIGEST : SHORT_DIGEST + 8] in line for line in narrow)


def test_a_key_value_grid_never_folds_a_digest() -> None:
    grid = fields([("file adapter_model.safetensors", DIGEST), ("state", "approved")])
    for width in (80, 100):
        lines = shown(grid, width)
        (row,) = [line for line in lines if line.startswith("file")]
        assert row.endswith(DIGEST) or row.endswith(DIGEST[:SHORT_DIGEST] + "…")
        assert len([line for line in lines if line.strip()]) == 2  # one line each
    assert full(None) == "-"
