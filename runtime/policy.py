"""Switching policies: which adapter loads an episode allows, and what comes next.

- `HardPolicy(order)`: a prescribed order (plan -> search -> write). Loading anything but the
  next capability of the order is a policy violation; when the model stops without loading
  the next one, the runtime loads it itself (`forced_next`).
- `SoftPolicy(guesses, constrained)`: the bare backbone chooses; any capability of the
  library may be loaded. `guesses` maps the active configuration to the one worth prefetching
  while an external tool runs (default: the bare backbone, which decides after a phase).
  `constrained`: whenever no adapter is active (at the start and at each phase end) the
  runtime offers only the moves valid now, loading one capability or closing with `closing`,
  and the engine decodes that choice under a mask (`runtime.choice`): the backbone's own
  logits choose among valid tool calls. A phase ends when the adapter offloads itself or
  replies without a tool call (then the runtime offloads it).

A policy is stateless; the episode passes the capabilities it has loaded so far.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from runtime.engine import Config
from runtime.errors import InvalidPolicyError, PolicyViolationError

DEFAULT_ORDER = ("plan", "search", "write")
BACKBONE = "backbone"  # how users write the bare-backbone configuration (None) in guesses


class Policy(ABC):
    kind: ClassVar[str]

    @abstractmethod
    def check_load(self, capability: str, loaded: Sequence[str]) -> None:
        """Raise PolicyViolationError if loading `capability` now is not allowed."""

    @abstractmethod
    def next_config(self, active: Config, loaded: Sequence[str]) -> Config:
        """The configuration worth prefetching while a tool call is in flight."""

    def forced_next(self, loaded: Sequence[str]) -> str | None:
        """The capability the runtime loads itself when the model stops; None to finish."""
        return None

    @abstractmethod
    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class HardPolicy(Policy):
    order: tuple[str, ...] = DEFAULT_ORDER
    kind: ClassVar[str] = "hard"

    def _expected(self, loaded: Sequence[str]) -> str | None:
        return self.order[len(loaded)] if len(loaded) < len(self.order) else None

    def check_load(self, capability: str, loaded: Sequence[str]) -> None:
        expected = self._expected(loaded)
        path = " -> ".join(self.order)
        if expected is None:
            raise PolicyViolationError(
                f"hard policy ({path}): every phase is done; write the final answer"
            )
        if capability != expected:
            raise PolicyViolationError(
                f"hard policy ({path}): load {expected!r} next, not {capability!r}"
            )

    def next_config(self, active: Config, loaded: Sequence[str]) -> Config:
        return self._expected(loaded)

    def forced_next(self, loaded: Sequence[str]) -> str | None:
        return self._expected(loaded)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "order": list(self.order)}


CLOSING = "Done."  # the closing reply of the trained trajectories (`tasks.trajectories`)


@dataclass(frozen=True)
class SoftPolicy(Policy):
    guesses: Mapping[Config, Config] = field(default_factory=dict)
    constrained: bool = False
    closing: str = CLOSING
    kind: ClassVar[str] = "soft"

    def check_load(self, capability: str, loaded: Sequence[str]) -> None:
        return None

    def next_config(self, active: Config, loaded: Sequence[str]) -> Config:
        return self.guesses.get(active)

    def to_json(self) -> dict[str, Any]:
        guesses = {str(k): v for k, v in self.guesses.items()}
        out: dict[str, Any] = {"kind": self.kind, "guesses": guesses}
        if self.constrained:  # named only when on: the plain soft policy's JSON is unchanged
            out["constrained"] = True
        return out


def make_policy(
    kind: str,
    order: Sequence[str] | None = None,
    library: Collection[str] | None = None,
    guesses: Mapping[Config, Config] | None = None,
    constrained: bool = False,
) -> Policy:
    """Build a policy from user input, checking its capabilities against the library."""
    if kind == "soft":
        if order is not None:
            raise InvalidPolicyError("an order applies to the hard policy only")
        names = [n for pair in (guesses or {}).items() for n in pair if n is not None]
        _check_known(names, library)
        return SoftPolicy(dict(guesses or {}), constrained=constrained)
    if constrained:
        raise InvalidPolicyError("a constrained choice applies to the soft policy only")
    if kind != "hard":
        raise InvalidPolicyError(f"unknown policy {kind!r}; use 'hard' or 'soft'")
    if guesses:
        raise InvalidPolicyError("prefetch guesses apply to the soft policy only")
    order = tuple(order) if order is not None else _default_order(library)
    if not order:
        raise InvalidPolicyError("a hard policy needs a non-empty order")
    if len(set(order)) != len(order):
        raise InvalidPolicyError(f"order repeats a capability: {', '.join(order)}")
    _check_known(order, library)
    return HardPolicy(order)


def parse_guesses(pairs: Mapping[str, str]) -> dict[Config, Config]:
    """{"search": "write", "write": "backbone"} -> {"search": "write", "write": None}."""
    return {_config(k): _config(v) for k, v in pairs.items()}


def _config(name: str) -> Config:
    return None if name == BACKBONE else name


def _default_order(library: Collection[str] | None) -> tuple[str, ...]:
    if library is None:
        return DEFAULT_ORDER
    return tuple(n for n in DEFAULT_ORDER if n in library)


def _check_known(names: Sequence[str], library: Collection[str] | None) -> None:
    if library is None:
        return
    unknown = [n for n in names if n not in library]
    if unknown:
        raise InvalidPolicyError(
            f"unknown capabilities {', '.join(unknown)}; library has {', '.join(sorted(library))}"
        )
