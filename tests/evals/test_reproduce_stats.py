"""The reproduce table's statistics: Wilson intervals, the mean's bootstrap interval (the
registry's paired bootstrap), the exact McNemar test and the power of a size."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evals.reproduce.stats import (
    mcnemar_exact,
    mean_interval,
    min_discordant,
    paired_test,
    wilson,
)
from registry.paired import ItemMismatchError


@given(st.integers(1, 200).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_holds_the_proportion_inside_zero_and_one(case: tuple[int, int]) -> None:
    k, n = case
    lo, hi = wilson(k, n)
    assert 0.0 <= lo <= k / n <= hi <= 1.0
    assert hi - lo > 0


def test_wilson_matches_the_textbook_value() -> None:
    """4 of 8: centre 0.5, half-width 1.96/(1+1.96^2/8) * sqrt(1/32 + 1.96^2/256)."""
    lo, hi = wilson(4, 8)
    assert (lo, hi) == pytest.approx((0.2152, 0.7848), abs=1e-4)
    assert wilson(0, 8)[0] == 0.0
    assert wilson(8, 8)[1] == 1.0
    with pytest.raises(ValueError, match="9 of 8"):
        wilson(9, 8)


@given(st.integers(0, 30), st.integers(0, 30))
def test_mcnemar_is_symmetric_and_a_probability(b: int, c: int) -> None:
    p = mcnemar_exact(b, c)
    assert p == mcnemar_exact(c, b)
    assert 0.0 < p <= 1.0
    if b == c:
        assert p == 1.0


def test_mcnemar_exact_values_and_the_smallest_significant_count() -> None:
    assert mcnemar_exact(5, 0) == pytest.approx(2 / 32)  # not significant at 0.05
    assert mcnemar_exact(6, 0) == pytest.approx(2 / 64)
    assert mcnemar_exact(7, 1) == pytest.approx(2 * 9 / 256)
    assert min_discordant(0.05) == 6
    assert min_discordant(0.01) == 8


@given(st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=60))
def test_the_mean_interval_holds_the_mean_and_is_seeded(ems: list[float]) -> None:
    scores = {f"q{i}": v for i, v in enumerate(ems)}
    lo, hi = mean_interval(scores, seed="s")
    mean = math.fsum(ems) / len(ems)
    assert 0.0 <= lo <= mean + 1e-12
    assert mean - 1e-12 <= hi <= 1.0
    assert mean_interval(scores, seed="s") == (lo, hi)


@given(st.lists(st.tuples(st.sampled_from([0.0, 1.0]), st.sampled_from([0.0, 1.0])),
                min_size=1, max_size=60))  # fmt: skip
def test_the_paired_test_counts_discordant_items(pairs: list[tuple[float, float]]) -> None:
    ref = {f"q{i}": a for i, (a, _) in enumerate(pairs)}
    cand = {f"q{i}": b for i, (_, b) in enumerate(pairs)}
    t = paired_test(ref, cand, seed="s")
    assert t.reference_only == sum(a > b for a, b in pairs)
    assert t.candidate_only == sum(b > a for a, b in pairs)
    assert t.delta == pytest.approx((t.candidate_only - t.reference_only) / len(pairs))
    assert t.ci_low <= t.delta + 1e-12
    assert t.delta - 1e-12 <= t.ci_high
    assert t.significant == (t.p_value < 0.05)


def test_a_clear_win_is_significant_and_a_tie_is_not() -> None:
    ref = {f"q{i}": 1.0 if i < 12 else 0.0 for i in range(40)}
    worse = dict.fromkeys(ref, 0.0)
    assert paired_test(ref, worse, seed="s").significant  # 12 discordant, all one way
    same = paired_test(ref, dict(ref), seed="s")
    assert (same.p_value, same.delta, same.reference_only) == (1.0, 0.0, 0)
    assert paired_test(ref, worse, seed="s").mdd80 == pytest.approx(
        (1.959964 + 0.841621) * math.sqrt(12 / 40 / 40), rel=1e-5
    )


def test_items_must_match() -> None:
    with pytest.raises(ItemMismatchError):
        paired_test({"a": 1.0}, {"b": 1.0}, seed="s")


def test_the_table_prints_intervals_and_the_paired_column() -> None:
    from evals.reproduce.report import accuracy_table, power_lines, table
    from evals.runner import ItemResult
    from evals.scoring import ItemScore
    from tasks.questions import KINDS

    def item(n: int, kind: str, em: float) -> ItemResult:
        return ItemResult(ItemScore(f"q{n}", kind, "x", em, em, 0.0, 0.0), "answer", 5, 1.0)

    kinds = [k for k in KINDS for _ in range(8)]
    results = {
        "weact_hard": {f"q{n}": item(n, k, float(n % 8 < 4)) for n, k in enumerate(kinds)},
        "single_lora": {f"q{n}": item(n, k, 0.0) for n, k in enumerate(kinds)},
        "ties": {f"q{n}": item(n, k, float(n % 8 < 4)) for n, k in enumerate(kinds)},
    }
    rows = table(results)
    lines = accuracy_table(rows)
    hard = next(line for line in lines if line.startswith("| WeAct-hard |"))
    assert "50.0 [22, 78]" in hard
    assert "(reference)" in hard
    single = next(line for line in lines if line.startswith("| Single LoRA"))
    assert "+50.0 [" in single
    assert "p=0.000 *" in single
    ties = next(line for line in lines if line.startswith("| TIES"))
    assert "+0.0 [0, 0], p=1.000 |" in ties
    power = "\n".join(power_lines(rows))
    assert "at least 6 discordant" in power
    assert "below 15.0 points" in power
    assert "Single LoRA (one shared LoRA, all phases): 20 discordant, detectable 31.3" in power
    assert "TIES merge: 0 discordant, no discordant question" in power
    few = table({m: dict(list(r.items())[:5]) for m, r in results.items()})
    assert "no difference can be significant at n = 5" in "\n".join(power_lines(few))
