"""runtime.backoff: exponential delays with jitter, bounded, reset by a success."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.backoff import Backoff


@given(
    base=st.floats(min_value=0.01, max_value=10),
    factor=st.floats(min_value=1, max_value=100),
    failures=st.integers(min_value=1, max_value=200),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_delays_double_up_to_the_cap_with_jitter(base, factor, failures, seed) -> None:
    cap = base * factor
    backoff = Backoff(base, cap, random.Random(seed))
    for n in range(failures):
        ceiling = min(cap, base * 2**n)
        delay = backoff.next()
        assert ceiling / 2 <= delay <= ceiling
    backoff.reset()
    assert base / 2 <= backoff.next() <= base


def test_jitter_spreads_a_fleet() -> None:
    delays = {round(Backoff(1.0, 60.0).next(), 6) for _ in range(50)}
    assert len(delays) > 40


@pytest.mark.parametrize(("base", "cap"), [(0, 1), (2, 1), (-1, 5)])
def test_bad_bounds(base, cap) -> None:
    with pytest.raises(ValueError, match="base <= cap"):
        Backoff(base, cap)
