"""Module-name patterns: Python's verdict on the subset, refusals outside it, no backtracking.

`re` appears here only as the oracle, on patterns the tests generate.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from storage.lora import MAX_PATTERN_CHARS, ModulePattern, PatternError
from storage.lora.lookup import PatternTable

# a small alphabet so that generated names and patterns actually meet
NAME_CHARS = "ab_.1"
names = st.text(alphabet=NAME_CHARS + "\n", max_size=12)
literal = st.sampled_from(["a", "b", "_", "1", "-", "\\."])
atom = st.one_of(literal, st.just("."), st.just(".*"))
plain = st.lists(st.one_of(literal, st.just(".")), min_size=1, max_size=3).map("".join)
group = st.lists(plain, min_size=1, max_size=3).map(lambda alts: "(" + "|".join(alts) + ")")
sequence = st.lists(st.one_of(atom, group), min_size=1, max_size=5).map("".join)


@st.composite
def patterns(draw: st.DrawFn) -> str:
    options = draw(st.lists(sequence, min_size=1, max_size=3))
    body = "|".join(options)
    if len(options) == 1:
        body = ("^" if draw(st.booleans()) else "") + body + ("$" if draw(st.booleans()) else "")
    return body


@settings(max_examples=300)
@given(patterns(), names)
@example(r".*\.(q|v)_proj", "m.q_proj")
@example("a|b.a", "x.a")
@example("^a", "a\n")
@example("a$", "a\n")
def test_fullmatch_and_peft_lookup_agree_with_re(source: str, name: str) -> None:
    pattern = ModulePattern(source)
    assert pattern.fullmatch(name) == (re.fullmatch(source, name) is not None)
    peft = re.match(rf"(.*\.)?({source})$", name) is not None  # peft's get_pattern_key
    assert pattern.suffix_match(name) == peft


@given(patterns())
def test_a_pattern_accepted_here_is_a_valid_python_regex(source: str) -> None:
    ModulePattern(source)
    re.compile(source)


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("(a+)+$", "'+' is outside the supported subset"),
        ("(.*)*y", "'*' is supported only as '.*'"),
        ("(x|x|x)*y", "'*' is supported only as '.*'"),
        (r"(\w+\.?)+x", r"only the escape \. is supported"),
        ("(.*a){20}", "'{' is outside the supported subset"),
        (r"layers\.\d+\.q", r"only the escape \. is supported"),
        ("[qkv]_proj", "'[' is outside the supported subset"),
        ("q_proj?", "'?' is outside the supported subset"),
        ("(", "empty alternative"),
        ("(q_proj", "unbalanced '('"),
        ("q_proj)", "unbalanced ')'"),
        ("*q_proj", "'*' is supported only as '.*'"),
        ("(a|(b))", "nested groups are not supported"),
        ("a||b", "empty alternative"),
        ("^a|b", "'^' and '$' are not supported with top-level '|'"),
        ("", "pattern is empty"),
        ("a" * (MAX_PATTERN_CHARS + 1), "longer than"),
        ("q proj", "' ' is outside the supported subset"),
    ],
)
def test_patterns_outside_the_subset_are_refused_with_a_reason(source: str, why: str) -> None:
    with pytest.raises(PatternError, match=re.escape(why)):
        ModulePattern(source)


@given(st.text(max_size=20))
def test_any_text_either_compiles_or_is_refused(source: str) -> None:
    try:
        pattern = ModulePattern(source)
    except PatternError as exc:
        message = str(exc)
    else:
        re.compile(source)
        message = str(pattern.fullmatch("model.layers.0.self_attn.q_proj"))
    assert message
    assert "\n" not in message.replace(repr(source), "")


def test_backtracking_patterns_stay_linear() -> None:
    # For re, ".*" repeated k times against a non-matching name costs O(n^k) steps; the
    # automaton holds at most one state per pattern position and steps once per character.
    source = ".*" * 60 + "x"
    pattern = ModulePattern(source)
    name = "a" * 5000
    assert not pattern.fullmatch(name)
    assert not pattern.suffix_match(name)
    automaton = pattern._automaton(suffix=False)  # one cache entry per (state, char) seen
    assert len(automaton.cache) <= 3


@settings(max_examples=150)
@given(st.lists(patterns(), max_size=8, unique=True), names)
@example(["a.b", "b", "^a.b", ".*b"], "x.a_b")
def test_indexed_lookup_is_peft_first_match(sources: list[str], name: str) -> None:
    table = PatternTable([(ModulePattern(src), i) for i, src in enumerate(sources)])
    peft = next((i for i, src in enumerate(sources) if re.match(rf"(.*\.)?({src})$", name)), -1)
    assert table.lookup(name, -1) == peft
