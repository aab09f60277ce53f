"""Uncertainty of the reproduce table: intervals of each exact-match cell and paired tests.

- Per kind: exact match is 0 or 1 per question, so a cell is a binomial proportion; its 95 %
  interval is Wilson's score interval (sound at 8 items, where the normal one leaves [0, 1]).
- Mean: the macro mean over kinds. Every kind has the same number of test questions, so it
  equals the mean over all items; its interval is a seeded bootstrap of that mean, made by
  the registry's paired bootstrap (`registry.paired`, pure Python, the function the gate
  uses) against a baseline of zeros, whose difference is the mean itself.
- WeAct-hard against each other method on the same items: the paired bootstrap's interval of
  the difference and an exact McNemar test (two-sided binomial test on the discordant pairs).
- Power: with n paired items, an exact McNemar test can reach p < alpha only with at least
  `min_discordant(alpha)` discordant pairs, all one way: the smallest difference it can ever
  call significant is that over n. At the discordance observed, the difference it detects
  with 80 % power is (z_{1-alpha/2} + z_{0.8}) * sqrt(discordance / n) (normal approximation).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist

from registry.paired import paired_bootstrap

Z95 = NormalDist().inv_cdf(0.975)


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval of a proportion `successes / n` (both ends in [0, 1])."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n >= 1, got {successes} of {n}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # at 0 or n the ends are 0 and 1 exactly (computed, they miss by a rounding error)
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi


def mean_interval(scores: Mapping[str, float], seed: str) -> tuple[float, float]:
    """Seeded 95 % bootstrap interval of the mean of per-item scores."""
    zeros = dict.fromkeys(scores, 0.0)
    result = paired_bootstrap(zeros, scores, seed=seed)
    return result.ci_low, result.ci_high


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value of `b` pairs won by one side and `c` by the other."""
    if b < 0 or c < 0:
        raise ValueError("counts of discordant pairs must be >= 0")
    n = b + c
    if n == 0:
        return 1.0
    tail = math.fsum(math.comb(n, i) for i in range(min(b, c) + 1)) / float(2**n)
    return min(1.0, 2 * tail)


def min_discordant(alpha: float = 0.05) -> int:
    """The fewest discordant pairs (all one way) that an exact McNemar test rejects at `alpha`."""
    d = 1
    while mcnemar_exact(d, 0) >= alpha:
        d += 1
    return d


@dataclass(frozen=True)
class Paired:
    """`candidate - reference` on the items both scored (EM as 0/1)."""

    n: int
    delta: float
    ci_low: float
    ci_high: float
    reference_only: int  # items only the reference got right
    candidate_only: int
    p_value: float  # exact McNemar

    @property
    def significant(self) -> bool:
        return self.p_value < 0.05

    @property
    def mdd80(self) -> float:
        """The difference detected with 80 % power at this discordance (normal approx.)."""
        discordance = (self.reference_only + self.candidate_only) / self.n
        return (Z95 + NormalDist().inv_cdf(0.8)) * math.sqrt(discordance / self.n)


def paired_test(
    reference: Mapping[str, float], candidate: Mapping[str, float], seed: str
) -> Paired:
    """Paired bootstrap interval of the EM difference and the exact McNemar test; raises
    `registry.paired.ItemMismatchError` unless both scored the same items."""
    boot = paired_bootstrap(reference, candidate, seed=seed)
    keys = sorted(reference)
    ref_only = sum(1 for k in keys if reference[k] > candidate[k])
    cand_only = sum(1 for k in keys if candidate[k] > reference[k])
    return Paired(
        boot.n, boot.delta, boot.ci_low, boot.ci_high, ref_only, cand_only,
        mcnemar_exact(ref_only, cand_only),
    )  # fmt: skip
