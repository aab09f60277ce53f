"""The constrained soft policy: the backbone's own log-probabilities choose among valid moves.

The scoring helpers of `runtime.choice` are checked on their own (hypothesis); on the real
PeftEngine over the tiny model, `score_options` equals a brute-force forward of every context
and option with no cache, the move taken does not depend on the order in which the history
lists the capabilities (the greedy decode it replaced did), and a constrained soft episode
loads adapters (the bare tiny backbone never writes a `load_lora` call by itself).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.agent import Agent, AgentConfig
from runtime.chat import ASSISTANT_HEADER, encode, encode_turns
from runtime.choice import (
    ANSWER,
    best,
    branches,
    check_options,
    choice_options,
    chosen_move,
    decisions,
    option_scores,
    rotations,
)
from runtime.engine import AdapterSpec
from runtime.episode import EpisodeManager
from runtime.errors import InvalidPolicyError, InvalidTokensError, UnknownAdapterError
from runtime.lora_tools import DEFAULT_DESCRIPTIONS, lora_tool_schemas
from runtime.policy import SoftPolicy, make_policy

QUESTION = "What is the capital of France?"
# A question for which the greedy decode on the tiny random backbone follows the listing, and
# a question and closing reply for which its choice is a load (with "Done." it answers).
SEARCH = "Search the knowledge base."
PLAN, CLOSING = "Plan the research.", "0"


@given(st.lists(st.text(min_size=1, max_size=3), min_size=1, max_size=6, unique=True))
def test_rotations_list_every_name_once_in_every_position(names: list[str]) -> None:
    orders = rotations(names)
    assert orders == rotations(list(reversed(names)))  # the caller's order does not matter
    assert len(orders) == len(names)
    for position in range(len(names)):
        assert sorted(order[position] for order in orders) == sorted(names)


@given(st.lists(st.lists(st.integers(0, 4), min_size=1, max_size=4).map(tuple), min_size=1,
    max_size=5, unique=True))  # fmt: skip
def test_branches_cover_each_options_tokens(options: list[tuple[int, ...]]) -> None:
    nexts = branches(options)
    for o in options:
        assert all(o[i] in nexts[o[:i]] for i in range(len(o)))
    assert sum(len(t) for t in nexts.values()) == len({o[: i + 1] for o in options for i in
        range(len(o))})  # fmt: skip


prefix_free = st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=4).map(tuple),
    min_size=1, max_size=5, unique=True).filter(lambda os: not any(a != b and b[: len(a)] == a
    for a in os for b in os))  # fmt: skip


@given(prefix_free, st.lists(st.floats(-9, 0), min_size=4, max_size=4), st.integers(
    1, 3))  # fmt: skip
def test_an_option_scores_its_tokens_where_the_options_part_ways(
    options: list[tuple[int, ...]], lp: list[float], n: int
) -> None:
    """Brute force: a token counts when another option with the same prefix goes elsewhere."""
    # context c gives token t the log-probability lp[t] - c, after any prefix
    logprobs = [{p: {t: lp[t] - c for t in ts} for p, ts in branches(options).items()} for c in
        range(n)]  # fmt: skip
    scores = option_scores(options, logprobs)
    for o, score in zip(options, scores, strict=True):
        split = [i for i in range(len(o)) if any(q[:i] == o[:i] and q[i:i + 1] != o[i:i + 1]
            for q in options)]  # fmt: skip
        assert score == pytest.approx(sum(lp[o[i]] - (n - 1) / 2 for i in split))
        assert set(split) == {i for i in range(len(o)) if o[:i] in decisions(options)}
    i = best(scores)
    assert scores[i] == max(scores)
    assert all(s < scores[i] for s in scores[:i])


def test_options_must_be_prefix_free_and_non_empty() -> None:
    with pytest.raises(InvalidTokensError, match="prefix"):
        check_options([(1, 2), (1, 2, 3)])
    with pytest.raises(InvalidTokensError, match="prefix"):
        check_options([(1, 2), (1, 2)])
    with pytest.raises(InvalidTokensError, match="non-empty"):
        check_options([])
    with pytest.raises(InvalidTokensError, match="non-empty"):
        check_options([(1,), ()])


def test_a_listing_is_an_order_of_the_library() -> None:
    library = {n: AdapterSpec(n, "-", description=d) for n, d in DEFAULT_DESCRIPTIONS.items()}
    enum = lora_tool_schemas(library, ["write", "code", "plan", "search"])[0]["function"]
    assert enum["parameters"]["properties"]["capability"]["enum"][0] == "write"
    assert enum["description"].index("- write:") < enum["description"].index("- code:")
    with pytest.raises(UnknownAdapterError, match="plan"):
        lora_tool_schemas(library, ["write", "code", "search"])


def test_a_constrained_choice_is_for_the_soft_policy() -> None:
    policy = make_policy("soft", constrained=True)
    assert isinstance(policy, SoftPolicy)
    assert policy.to_json()["constrained"] is True
    with pytest.raises(InvalidPolicyError, match="soft policy only"):
        make_policy("hard", constrained=True)


@pytest.fixture(scope="module")
def engine(tiny_backbone: Path, tiny_adapters: dict[str, Path]) -> Any:
    from runtime.engines.peft import PeftEngine

    specs = [
        AdapterSpec(name, str(path), description=DEFAULT_DESCRIPTIONS[name])
        for name, path in tiny_adapters.items()
    ]
    return PeftEngine(tiny_backbone, specs)


def opening(engine: Any, order: list[str], question: str = QUESTION) -> list[int]:
    """The question's context with load_lora listing the capabilities in `order`."""
    tools = lora_tool_schemas(engine.adapters, order)
    turns = encode_turns(engine.tokenizer, [{"role": "user", "content": question}], tools)
    return [t for turn in turns for t in turn.ids] + encode(engine.tokenizer, ASSISTANT_HEADER)


def brute_force(engine: Any, key: str | None, context: list[int], prefix: tuple[int, ...]) -> Any:
    """The next-token log-probabilities after context + prefix, one uncached forward."""
    import torch

    with engine._forward_lock, torch.inference_mode():
        engine.holder.name = key
        logits = engine.model(input_ids=torch.tensor([context + list(prefix)])).logits[0, -1]
    return logits.float().log_softmax(-1)


@pytest.mark.parametrize("config", [None, "plan"])
def test_the_scores_are_the_models_log_probabilities(engine: Any, config: str | None) -> None:
    options = choice_options(engine.tokenizer, engine.adapters, "Done.")
    assert [o.move for o in options] == [*sorted(engine.adapters), ANSWER]
    opts = [o.ids for o in options]
    caps = sorted(engine.adapters)
    contexts = [opening(engine, order) for order in rotations(caps)]
    session = engine.new_session()
    session.append(contexts[1])  # the history is one of the contexts, cached as it goes
    if config is not None:
        session.activate(config)
    wanted = decisions(opts)
    assert len(wanted) == 2  # `<tool_call>` or the closing reply; then the name
    scored = session.score_branches(contexts, wanted)
    key = None if config is None else session.library[config]
    for got, context in zip(scored.logprobs, contexts, strict=True):
        assert set(got) == set(wanted)
        for prefix, tokens in wanted.items():
            lp = brute_force(engine, key, context, prefix)
            assert got[prefix] == pytest.approx({t: float(lp[t]) for t in tokens}, abs=1e-4)
    assert list(session.history) == contexts[1]
    assert scored.cache_hit >= len(contexts[1]) - 1  # its own context came from its cache

    result = session.choose(opts, contexts)
    assert result.token_ids == opts[best(option_scores(opts, scored.logprobs))]
    assert list(session.history) == contexts[1] + list(result.token_ids)


def test_a_choice_after_a_phase_rebuilds_what_the_adapter_ran(engine: Any) -> None:
    """The bare backbone re-processes the phase an adapter ran, under each rotated listing:
    a KV rebuild as after any switch, counted in the choice's time; the first choice of an
    episode rebuilds nothing, and the adapter loaded after it rebuilds the opening."""
    options = choice_options(engine.tokenizer, engine.adapters, "Done.")
    opts = [o.ids for o in options]
    caps = sorted(engine.adapters)
    openings = [opening(engine, order) for order in rotations(caps)]
    session = engine.new_session()
    session.append(openings[0])
    first = session.choose(opts, openings)
    assert (first.rebuild_s, session.rebuilt_tokens) == (0.0, 0)

    session.activate("plan")
    phase = session.generate(6)
    assert phase.rebuild_s > 0  # plan re-processes the opening the backbone ran
    assert session.rebuilt_tokens == len(openings[0]) - 1
    session.deactivate()
    before, ran = session.rebuilt_tokens, len(session.history)
    since = list(session.history[len(openings[0]) :])
    session.append(encode(engine.tokenizer, ASSISTANT_HEADER))
    tail = since + encode(engine.tokenizer, ASSISTANT_HEADER)
    again = session.choose(opts, [o + tail for o in openings])
    assert 0 < again.rebuild_s <= again.prefill_s
    # what plan ran beyond the backbone's cache (the opening), once per listing
    span = ran - 1 - (len(openings[0]) - 1)
    assert session.rebuilt_tokens - before == len(openings) * span
    session.close()


def greedy(options: list[tuple[int, ...]], logprobs: dict[Any, dict[int, float]]) -> int:
    """The masked greedy decode that the rotation-averaged choice replaced, from the same
    scores: at each point where the options part ways, the likelier token."""
    out: tuple[int, ...] = ()
    while out not in options:
        nexts = branches(options)[out]
        out += (max(nexts, key=lambda t: (logprobs[out][t], -t)) if len(nexts) > 1 else
            nexts[0],)  # fmt: skip
    return options.index(out)


def test_the_move_does_not_depend_on_the_listing_order(engine: Any) -> None:
    """Whatever order the history lists the capabilities in, the move is the same; the
    greedy decode under a mask that it replaced follows the listing on the tiny model."""
    options = choice_options(engine.tokenizer, engine.adapters, "Done.")
    opts = [o.ids for o in options]
    caps = sorted(engine.adapters)
    contexts = [opening(engine, order, SEARCH) for order in rotations(caps)]
    moves, greedy_moves = set(), set()
    for order in itertools.permutations(caps):
        session = engine.new_session()
        session.append(opening(engine, list(order), SEARCH))
        scored = session.score_branches([session.history], decisions(opts))
        greedy_moves.add(greedy(opts, scored.logprobs[0]))
        result = session.choose(opts, contexts)
        moves.add(chosen_move(options, result.token_ids).move)
        session.close()
    assert len(moves) == 1
    assert len(greedy_moves) > 1


def test_a_constrained_soft_episode_loads_adapters_on_the_tiny_model(engine: Any) -> None:
    policy = SoftPolicy(constrained=True, closing=CLOSING)
    free = EpisodeManager(engine, policy=make_policy("soft")).create()
    chosen = EpisodeManager(engine, policy=policy).create()
    seen: list[list[list[int]]] = []
    choose = chosen.session.choose

    def spy(options: Any, contexts: Any = None, on_token: Any = None) -> Any:
        seen.append([list(c) for c in contexts])
        return choose(options, contexts, on_token)

    chosen.session.choose = spy  # type: ignore[method-assign]

    async def main() -> None:
        config = AgentConfig(max_steps=6, max_new_tokens=8)
        await Agent(engine.tokenizer, None, config).run(free, PLAN)
        await Agent(engine.tokenizer, None, config).run(chosen, PLAN)

    anyio.run(main)
    assert free.status == "done", free.error
    assert free.control.loaded == []  # unconstrained, the random backbone loads nothing
    assert chosen.status == "done", chosen.error
    assert chosen.control.loaded, [m.get("content") for m in chosen.messages]
    assert set(chosen.control.loaded) <= set(engine.adapters)
    choices = [e for e in chosen.events if e["type"] == "choice"]
    assert choices
    assert choices[0]["move"] == chosen.control.loaded[0]
    # the first choice rebuilds nothing; the adapter it loads re-processes the opening
    steps = chosen.steps
    assert (steps[0].active, steps[0].rebuild_s) == (None, 0.0)
    assert steps[1].active == chosen.control.loaded[0]
    assert steps[1].rebuild_s > 0
    # the first choice was scored after the question under each rotation of the listing
    caps = sorted(engine.adapters)
    assert seen[0] == [opening(engine, order, PLAN) for order in rotations(caps)]
