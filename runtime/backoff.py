"""Exponential backoff with jitter, for a node that cannot reach its registry.

Delays double from `base` up to `cap`; each is drawn from [d/2, d] ("equal jitter"), so a
fleet cut off at the same moment does not come back in lockstep, and no retry is immediate.

    backoff = Backoff(base=1.0, cap=60.0)
    time.sleep(backoff.next())  # ~0.5-1 s, then ~1-2 s, ~2-4 s, ... at most 60 s
    backoff.reset()             # after a success
"""

from __future__ import annotations

import random


class Backoff:
    def __init__(self, base: float, cap: float, rng: random.Random | None = None) -> None:
        if not 0 < base <= cap:
            raise ValueError(f"need 0 < base <= cap, got base={base}, cap={cap}")
        self.base = base
        self.cap = cap
        self.failures = 0
        self._rng = rng or random.Random()

    def next(self) -> float:
        """The delay before the next attempt; each call counts one more failure."""
        ceiling = min(self.cap, self.base * 2.0 ** min(self.failures, 64))
        self.failures += 1
        return ceiling / 2 + self._rng.uniform(0, ceiling / 2)

    def reset(self) -> None:
        self.failures = 0
