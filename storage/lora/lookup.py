"""PEFT's first-match lookup over ``rank_pattern`` / ``alpha_pattern`` keys, indexed.

For each module PEFT takes the first key, in file order, with
``re.match(rf"(.*\\.)?({key})$", module)``. Trying every key on every module costs keys x
modules matches: an EVA adapter of a 126-layer model has a key per module (882 x 882). Keys of
a fixed shape (literals and '.', which is what peft and EVA write) are indexed instead: the
keys of one shape (length, offsets of the literal runs, anchored or not) share one dict from
their literal runs to the first key's index, so a module costs one probe per shape, plus a
scan of the few keys with '.*' or '|' (bounded in `storage.lora.config`) that come earlier.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

from storage.lora.pattern import ModulePattern

T = TypeVar("T")
Shape = tuple[int, tuple[tuple[int, int], ...], bool]  # size, literal spans, anchored


class PatternTable(Generic[T]):
    """Pattern keys -> values, in file order; `lookup` is PEFT's get_pattern_key."""

    def __init__(self, items: Sequence[tuple[ModulePattern, T]] = ()) -> None:
        self.items = tuple(items)
        self._shapes: dict[Shape, dict[tuple[str, ...], int]] = {}
        self._scan: list[int] = []  # keys with '.*' or '|', by index
        for index, (pattern, _) in enumerate(self.items):
            fixed = pattern.fixed
            if fixed is None:
                self._scan.append(index)
                continue
            spans = tuple((offset, offset + len(run)) for offset, run in fixed.runs)
            table = self._shapes.setdefault((fixed.size, spans, pattern.anchored), {})
            table.setdefault(tuple(run for _, run in fixed.runs), index)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def shape_count(self) -> int:
        """Distinct shapes among the fixed keys: the probes one lookup makes."""
        return len(self._shapes)

    @property
    def scanned(self) -> int:
        """Keys with '.*' or '|': each costs an automaton run per lookup."""
        return len(self._scan)

    def lookup(self, module: str, default: T) -> T:
        """The value of the first key whose pattern ends `module`, else `default`."""
        if "\n" in module:  # outside the index's assumptions; module paths never have one
            return next((v for p, v in self.items if p.suffix_match(module)), default)
        best = len(self.items)
        for (size, spans, anchored), table in self._shapes.items():
            start = len(module) - size
            if start < 0 or (start > 0 and (anchored or module[start - 1] != ".")):
                continue
            index = table.get(tuple(module[start + a : start + b] for a, b in spans))
            if index is not None and index < best:
                best = index
        for index in self._scan:
            if index >= best:
                break
            if self.items[index][0].suffix_match(module):
                best = index
                break
        return self.items[best][1] if best < len(self.items) else default
