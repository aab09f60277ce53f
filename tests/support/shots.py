"""Screenshots of the browser tests, listed in pytest's terminal summary.

`TAKEN` collects the files this process wrote; under pytest-xdist each worker hands its list
to the controller, which prints them all (see the hooks in `support.fixtures`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TAKEN: list[Path] = []


@dataclass
class Shots:
    folder: Path
    taken: list[Path] = field(default_factory=lambda: TAKEN)

    def take(self, page: Any, name: str) -> Path:
        """A full-page PNG of ``page`` as ``<folder>/<name>.png``."""
        path = self.folder / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        self.taken.append(path)
        return path
