"""What the vLLM session counts as a KV rebuild (`rebuilt_tokens`): only history re-processed
because another configuration ran since this one did, not the partial last block that vLLM's
prefix cache re-processes on every request. Pure arithmetic: no vLLM needed."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from runtime.engines.vllm.session import rebuilt_tokens

BLOCKS = st.sampled_from([1, 16, 32, 128])


@st.composite
def requests(draw: st.DrawFn) -> tuple[int, int, int, int, int]:
    """(seen, own, prompt, cached, block size) as a session can meet them."""
    block = draw(BLOCKS)
    seen = draw(st.integers(0, 4_000))
    own = draw(st.integers(0, seen))
    prompt = draw(st.integers(seen, seen + 500))  # history only grows
    cached = draw(st.integers(0, prompt)) // block * block  # whole blocks only
    return seen, own, prompt, cached, block


@given(requests())
def test_a_rebuild_is_part_of_what_was_prefilled(r: tuple[int, int, int, int, int]) -> None:
    seen, own, prompt, cached, block = r
    assert 0 <= rebuilt_tokens(seen, own, prompt, cached, block) <= prompt - cached


@given(st.integers(0, 4_000), st.integers(0, 500), BLOCKS)
def test_no_switch_no_rebuild(seen: int, new: int, block: int) -> None:
    """The same configuration again: its full blocks are cached, its tail is re-processed."""
    cached = seen // block * block
    assert rebuilt_tokens(seen, seen, seen + new, cached, block) == 0


@given(st.integers(0, 4_000), st.integers(1, 2_000), st.integers(0, 500), BLOCKS)
def test_back_after_a_switch_rebuilds_what_the_other_configuration_ran(
    own: int, other: int, new: int, block: int
) -> None:
    seen = own + other
    cached = own // block * block  # this configuration's blocks survived
    assert rebuilt_tokens(seen, own, seen + new, cached, block) == other


@given(st.integers(32, 4_000), st.integers(0, 2_000), st.integers(0, 500))
def test_an_emptied_cache_rebuilds_everything_seen(own: int, other: int, new: int) -> None:
    seen = own + other
    assert rebuilt_tokens(seen, own, seen + new, 0, 32) == seen


@given(st.integers(0, 4_000), st.integers(0, 500), BLOCKS)
def test_a_configuration_met_for_the_first_time(seen: int, new: int, block: int) -> None:
    cached = 0  # another LoRA's blocks are never this one's
    assert rebuilt_tokens(seen, 0, seen + new, cached, block) == seen
