from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.errors import InvalidPolicyError, PolicyViolationError
from runtime.policy import HardPolicy, SoftPolicy, make_policy, parse_guesses

LIBRARY = ("plan", "search", "write", "code")


def test_hard_policy_walks_its_order() -> None:
    policy = HardPolicy(("plan", "search", "write"))
    loaded: list[str] = []
    for name in ("plan", "search", "write"):
        assert policy.forced_next(loaded) == name
        assert policy.next_config(None, loaded) == name
        policy.check_load(name, loaded)
        loaded.append(name)
    assert policy.forced_next(loaded) is None
    with pytest.raises(PolicyViolationError, match="every phase is done"):
        policy.check_load("plan", loaded)


@given(st.lists(st.sampled_from(LIBRARY), max_size=6), st.sampled_from(LIBRARY))
def test_hard_policy_allows_exactly_the_next_capability(loaded, name) -> None:
    order = ("plan", "search", "write")
    policy = HardPolicy(order)
    prefix = list(order[: min(len(loaded), 3)])
    expected = order[len(prefix)] if len(prefix) < 3 else None
    if name == expected:
        policy.check_load(name, prefix)
    else:
        with pytest.raises(PolicyViolationError):
            policy.check_load(name, prefix)


def test_soft_policy_allows_anything_and_never_forces() -> None:
    policy = SoftPolicy({None: "plan", "plan": None})
    for name in LIBRARY:
        policy.check_load(name, ["write", "write"])
    assert policy.forced_next([]) is None
    assert policy.next_config(None, []) == "plan"
    assert policy.next_config("plan", []) is None
    assert policy.next_config("search", []) is None


@pytest.mark.parametrize(
    ("kind", "order", "match"),
    [
        ("greedy", None, "unknown policy"),
        ("hard", [], "non-empty"),
        ("hard", ["plan", "plan"], "repeats"),
        ("hard", ["plan", "draw"], "unknown capabilities draw"),
        ("soft", ["plan"], "hard policy only"),
    ],
)
def test_make_policy_rejects_bad_input(kind, order, match) -> None:
    with pytest.raises(InvalidPolicyError, match=match):
        make_policy(kind, order, library=LIBRARY)


def test_make_policy_defaults_to_the_library_part_of_plan_search_write() -> None:
    assert make_policy("hard", library=("write", "plan")) == HardPolicy(("plan", "write"))
    assert make_policy("hard", ["search", "write"], LIBRARY).to_json() == {
        "kind": "hard",
        "order": ["search", "write"],
    }
    assert make_policy("soft", library=LIBRARY).to_json()["kind"] == "soft"
    with pytest.raises(InvalidPolicyError):
        make_policy("soft", library=LIBRARY, guesses={None: "draw"})


def test_guesses_name_the_backbone_in_words() -> None:
    guesses = parse_guesses({"search": "write", "write": "backbone", "backbone": "plan"})
    assert guesses == {"search": "write", "write": None, None: "plan"}
    policy = make_policy("soft", library=LIBRARY, guesses=guesses)
    assert policy.next_config(None, []) == "plan"
    with pytest.raises(InvalidPolicyError, match="soft policy only"):
        make_policy("hard", library=LIBRARY, guesses=guesses)
