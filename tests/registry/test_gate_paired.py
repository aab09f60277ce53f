"""The paired-bootstrap gate as pure logic: deterministic, and it fails only real regressions."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.domain import Benchmark, Scored
from registry.gate_rules import GateSettings, judge
from registry.paired import ItemMismatchError, paired_bootstrap


def _items(scores: list[float]) -> dict[str, float]:
    return {f"q{i:03d}": s for i, s in enumerate(scores)}


def _side(scores: list[float], by: str = "eve", id_: int = 1) -> Scored:
    items = _items(scores)
    return Scored(id_, sum(scores) / len(scores), items, by)


def _bench(direction: str = "higher", tolerance: float = 0.02) -> Benchmark:
    return Benchmark("research-em", 1, "d" * 64, "library", "em", direction, tolerance)


def _accuracy(n: int, correct: int, seed: int) -> list[float]:
    scores = [1.0] * correct + [0.0] * (n - correct)
    random.Random(seed).shuffle(scores)
    return scores


def test_bootstrap_is_deterministic_for_its_seed() -> None:
    base, cand = _items(_accuracy(80, 50, 1)), _items(_accuracy(80, 44, 2))
    first = paired_bootstrap(base, cand, seed="s")
    assert paired_bootstrap(base, cand, seed="s") == first
    assert paired_bootstrap(dict(reversed(base.items())), cand, seed="s") == first  # order-free
    other = paired_bootstrap(base, cand, seed="t")
    assert (other.ci_low, other.ci_high) != (first.ci_low, first.ci_high)
    assert other.delta == first.delta == pytest.approx((44 - 50) / 80)
    assert first.n == 80


def test_items_must_match() -> None:
    with pytest.raises(ItemMismatchError, match="1 only in the baseline, 0 only in the candidate"):
        paired_bootstrap({"a": 1.0, "b": 0.0}, {"a": 1.0}, seed="s")
    with pytest.raises(ItemMismatchError):
        paired_bootstrap({}, {}, seed="s")


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=30),
    st.floats(-2, 2, allow_nan=False),
)
def test_interval_brackets_a_constant_shift(base: list[float], shift: float) -> None:
    result = paired_bootstrap(
        _items(base), _items([b + shift for b in base]), seed="p", resamples=200
    )
    assert result.ci_low == pytest.approx(shift, abs=1e-9)
    assert result.ci_high == pytest.approx(shift, abs=1e-9)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=40))
def test_interval_is_ordered_and_within_the_differences(pairs: list[tuple[float, float]]) -> None:
    diffs = [c - b for b, c in pairs]
    result = paired_bootstrap(
        _items([b for b, _ in pairs]), _items([c for _, c in pairs]), seed="p", resamples=200
    )
    assert min(diffs) - 1e-9 <= result.ci_low <= result.ci_high <= max(diffs) + 1e-9


def test_unchanged_library_passes() -> None:
    scores = _accuracy(160, 70, 3)
    check = judge(_bench(), _side(scores), _side(scores, id_=2))
    assert (check.verdict, check.test, check.n) == ("pass", "paired_bootstrap", 160)
    assert check.delta == 0.0
    assert (check.ci_low, check.ci_high) == (0.0, 0.0)
    assert (check.baseline_by, check.candidate_by) == ("eve", "eve")


def test_injected_per_item_regression_fails() -> None:
    base = _accuracy(160, 100, 4)
    cand = list(base)
    for i in [i for i, s in enumerate(base) if s == 1.0][:24]:  # 24 items break: -15 points
        cand[i] = 0.0
    check = judge(_bench(), _side(base), _side(cand))
    assert check.verdict == "fail"
    assert check.delta == pytest.approx(-24 / 160)
    assert check.ci_high is not None
    assert check.ci_high < 0


def test_a_regression_within_tolerance_or_within_noise_passes() -> None:
    base = _accuracy(160, 100, 5)
    cand = list(base)
    cand[[i for i, s in enumerate(base) if s == 1.0][0]] = 0.0  # 1 of 160: significant? no
    assert judge(_bench(tolerance=0.02), _side(base), _side(cand)).verdict == "pass"
    # noisy: many items flip both ways, net -3 items; not significant
    noisy = list(base)
    ones = [i for i, s in enumerate(base) if s == 1.0]
    zeros = [i for i, s in enumerate(base) if s == 0.0]
    for i in ones[:20]:
        noisy[i] = 0.0
    for i in zeros[:17]:
        noisy[i] = 1.0
    check = judge(_bench(tolerance=0.0), _side(base), _side(noisy))
    assert check.delta == pytest.approx(-3 / 160)
    assert check.ci_low is not None
    assert check.ci_low < 0 < (check.ci_high or 0)
    assert check.verdict == "pass"


def test_significant_but_smaller_than_tolerance_passes() -> None:
    base = [0.5] * 100
    cand = [0.49] * 100  # every item 0.01 worse: significant, but tolerance 0.02
    assert judge(_bench(tolerance=0.02), _side(base), _side(cand)).verdict == "pass"
    assert judge(_bench(tolerance=0.005), _side(base), _side(cand)).verdict == "fail"


def test_lower_is_better_direction() -> None:
    base = [1.0 + 0.01 * (i % 7) for i in range(60)]
    worse = [b + 0.3 for b in base]
    better = [b - 0.3 for b in base]
    assert judge(_bench("lower", 0.1), _side(base), _side(worse)).verdict == "fail"
    assert judge(_bench("lower", 0.1), _side(base), _side(better)).verdict == "pass"


def test_missing_mismatch_and_point_fallback() -> None:
    base = _side([1.0, 0.0, 1.0])
    assert judge(_bench(), base, None, detail="why").verdict == "missing"
    assert judge(_bench(), base, None, detail="why").detail == "why"
    assert judge(_bench(), None, base).verdict == "no_baseline"
    short = Scored(2, 1.0, {"q000": 1.0}, "eve")
    assert judge(_bench(), base, short).verdict == "mismatch"
    plain = Scored(3, 0.2, None, "eve")
    point = judge(_bench(), base, plain)
    assert (point.test, point.verdict) == ("point", "fail")


def test_settings_change_the_interval_not_the_delta() -> None:
    base, cand = _side(_accuracy(60, 30, 6)), _side(_accuracy(60, 25, 7))
    a = judge(_bench(), base, cand, GateSettings(seed="a"))
    b = judge(_bench(), base, cand, GateSettings(seed="b"))
    assert a.delta == b.delta
    assert (a.ci_low, a.ci_high) != (b.ci_low, b.ci_high)
