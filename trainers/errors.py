"""Typed errors of the trainers package.

TrainerError
├── TrajectoryError (+ ValueError)       a trajectory line that breaks the format (line, field)
├── NoSamplesError (+ ValueError)        the data holds no phase of the requested capability
├── AdapterSpecError (+ ValueError)      a bad `NAME=DIR` adapter, or adapters that do not fit
├── RootChangedError (+ RuntimeError)    the backbone or a frozen adapter changed in training
├── MergeError (+ ValueError)            adapters that cannot be merged, unknown method
└── OutputExistsError (+ FileExistsError) an output directory that is not empty

Publishing that would replay data is refused with `registry.errors.ReplayError`: the check
(`registry.client.replay`) is the one `weact adapter push` of a trained directory runs too.
"""

from __future__ import annotations


class TrainerError(Exception):
    """Base of every error raised by `trainers`."""


class TrajectoryError(TrainerError, ValueError):
    """A trajectory that breaks the format; names the source, line, trajectory and field."""

    def __init__(
        self,
        problem: str,
        *,
        field: str = "",
        line: int | None = None,
        source: str = "",
        trajectory: str | None = None,
    ) -> None:
        self.problem = problem
        self.field = field
        self.line = line
        self.source = source
        self.trajectory = trajectory
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.source or "<trajectory>"
        if self.line is not None:
            where += f":{self.line}"
        parts = [where]
        if self.trajectory is not None:
            parts.append(f"trajectory {self.trajectory!r}")
        if self.field:
            parts.append(self.field)
        return ": ".join(parts) + f": {self.problem}"

    def located(self, *, line: int, source: str, trajectory: str | None) -> TrajectoryError:
        """The same error, with where it was found."""
        return TrajectoryError(
            self.problem,
            field=self.field,
            line=line,
            source=source,
            trajectory=trajectory if self.trajectory is None else self.trajectory,
        )


class NoSamplesError(TrainerError, ValueError):
    """No phase of the requested capability (or no supervised token) in the data."""


class AdapterSpecError(TrainerError, ValueError):
    """A `NAME=DIR` adapter option that is malformed, missing, or does not fit the others."""


class RootChangedError(TrainerError, RuntimeError):
    """Weights that must stay bit-identical (backbone, frozen adapters) changed."""

    def __init__(self, changed: dict[str, tuple[str, str]]) -> None:
        self.changed = dict(changed)
        lines = [f"{name}: {before} -> {after}" for name, (before, after) in changed.items()]
        super().__init__(
            "refusing to publish: weights that must stay frozen changed\n  " + "\n  ".join(lines)
        )


class MergeError(TrainerError, ValueError):
    """Adapters that cannot be merged (different backbones, shapes), or bad merge options."""


class OutputExistsError(TrainerError, FileExistsError):
    """An output directory that already holds something; nothing is overwritten."""
