"""The shape of progress that long library operations report: named steps.

A library function with a few long steps (a SmolLM2 conversion, a library install, an adapter
merge) takes `steps: Steps | None` and stays silent when it is None; a CLI passes
`clikit.progress.steps`, which shows them on stderr. Defined here, in the lowest layer every
such caller imports (the trainers import the runtime, not the other way round); it imports
nothing of the project.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

Step = Callable[[str], None]
"""Called with a step's name as it begins."""

Steps = Callable[[str, int], AbstractContextManager[Step]]
"""`steps(label, total)`: a context whose value is a `Step`."""


def told(steps: Steps | None, label: str, total: int) -> AbstractContextManager[Step]:
    """`steps(label, total)`, or a silent `Step` when nobody listens (`steps` is None)."""
    return steps(label, total) if steps is not None else nullcontext(_silent)


def _silent(name: str) -> None:
    """The `Step` of an operation nobody watches."""
