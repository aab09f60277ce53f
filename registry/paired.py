"""Paired bootstrap of a mean difference, in pure Python (the registry installs without numpy).

Baseline and candidate scores are paired by item id; the per-item differences
``candidate - baseline`` are resampled with replacement ``resamples`` times by a
``random.Random`` seeded with a string (hashed with SHA-512 by Python, so the stream does not
depend on ``PYTHONHASHSEED`` or the platform), and the percentile interval of the resampled
means is returned. Same inputs and seed, same interval, on every machine.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class PairedResult:
    n: int
    baseline: float  # mean over the paired items
    candidate: float
    delta: float  # candidate - baseline
    ci_low: float
    ci_high: float


class ItemMismatchError(ValueError):
    """The two evaluations did not score the same items."""

    def __init__(self, only_baseline: int, only_candidate: int) -> None:
        self.only_baseline = only_baseline
        self.only_candidate = only_candidate
        super().__init__(
            f"items differ: {only_baseline} only in the baseline, "
            f"{only_candidate} only in the candidate"
        )


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def paired_bootstrap(
    baseline: Mapping[str, float],
    candidate: Mapping[str, float],
    *,
    seed: str,
    resamples: int = 2000,
    confidence: float = 0.95,
) -> PairedResult:
    """Mean difference and its percentile bootstrap interval over the items both scored.

    Raises ``ItemMismatchError`` unless both cover the same, non-empty set of items.
    """
    if set(baseline) != set(candidate) or not baseline:
        raise ItemMismatchError(
            len(set(baseline) - set(candidate)), len(set(candidate) - set(baseline))
        )
    if resamples < 1 or not 0 < confidence < 1:
        raise ValueError("resamples must be >= 1 and confidence in (0, 1)")
    keys = sorted(baseline)
    diffs = [candidate[k] - baseline[k] for k in keys]
    n = len(diffs)
    rng = random.Random(seed)
    means = sorted(_mean(rng.choices(diffs, k=n)) for _ in range(resamples))
    tail = (1 - confidence) / 2
    low = means[min(resamples - 1, math.floor(tail * resamples))]
    high = means[max(0, math.ceil((1 - tail) * resamples) - 1)]
    return PairedResult(
        n=n,
        baseline=_mean([baseline[k] for k in keys]),
        candidate=_mean([candidate[k] for k in keys]),
        delta=_mean(diffs),
        ci_low=low,
        ci_high=high,
    )
