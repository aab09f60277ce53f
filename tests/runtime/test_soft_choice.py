"""The constrained soft policy: the backbone's own logits choose among the valid moves.

`AllowedSequences` (the logits processor) is checked on its own with hypothesis; on the real
PeftEngine over the tiny model, the engine's choice is the masked greedy decode recomputed
from the model's next-token logits, and a constrained soft episode loads adapters (the bare
tiny backbone never writes a `load_lora` call by itself).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.agent import Agent, AgentConfig
from runtime.choice import ANSWER, AllowedSequences, choice_options, chosen_move
from runtime.engine import AdapterSpec
from runtime.episode import EpisodeManager
from runtime.errors import InvalidPolicyError, InvalidTokensError
from runtime.lora_tools import DEFAULT_DESCRIPTIONS
from runtime.policy import SoftPolicy, make_policy

options_st = st.lists(
    st.lists(st.integers(0, 5), min_size=1, max_size=5).map(tuple), min_size=1, max_size=6
).filter(lambda os: not any(a != b and b[: len(a)] == a for a in os for b in os))


def _greedy(options: list[tuple[int, ...]], scores: list[float]) -> tuple[int, ...]:
    """Brute force: the option whose tokens win at each step among the options still open."""
    out: tuple[int, ...] = ()
    while out not in options:
        nxt = {o[len(out)] for o in options if o[: len(out)] == out and len(o) > len(out)}
        out += (max(nxt, key=lambda t: (scores[t], -t)),)
    return out


@given(options_st.map(lambda os: list(dict.fromkeys(os))), st.lists(
    st.floats(-5, 5), min_size=6, max_size=6))  # fmt: skip
def test_masked_greedy_always_ends_in_an_option(
    options: list[tuple[int, ...]], scores: list[float]
) -> None:
    allowed = AllowedSequences(options)
    out: list[int] = []
    while allowed.complete(out) is None:
        out.append(allowed.pick(out, scores))
    assert tuple(out) in options
    assert tuple(out) == _greedy(options, scores)


def test_options_must_be_prefix_free_and_non_empty() -> None:
    with pytest.raises(InvalidTokensError, match="prefix"):
        AllowedSequences([(1, 2), (1, 2, 3)])
    with pytest.raises(InvalidTokensError, match="non-empty"):
        AllowedSequences([])
    with pytest.raises(InvalidTokensError, match="no option"):
        AllowedSequences([(1, 2)]).pick([2], [0.0] * 3)


def test_a_constrained_choice_is_for_the_soft_policy() -> None:
    policy = make_policy("soft", constrained=True)
    assert isinstance(policy, SoftPolicy)
    assert policy.to_json()["constrained"] is True
    with pytest.raises(InvalidPolicyError, match="soft policy only"):
        make_policy("hard", constrained=True)


@pytest.fixture(scope="module")
def engine(tiny_backbone: Path, tiny_adapters: dict[str, Path]):
    from runtime.engines.peft import PeftEngine

    specs = [
        AdapterSpec(name, str(path), description=DEFAULT_DESCRIPTIONS[name])
        for name, path in tiny_adapters.items()
    ]
    return PeftEngine(tiny_backbone, specs)


def test_the_choice_is_the_models_masked_greedy_decode(engine) -> None:
    tok = engine.tokenizer
    options = choice_options(tok, sorted(engine.adapters), "Done.")
    assert [o.move for o in options] == [*sorted(engine.adapters), ANSWER]
    prompt = tok.encode("<|im_start|>user\nWhat now?<|im_end|>\n<|im_start|>assistant\n")

    reference = engine.new_session()  # the same decode, one token at a time from the logits
    reference.append(prompt)
    allowed, out = AllowedSequences([o.ids for o in options]), []
    while allowed.complete(out) is None:
        token = allowed.pick(out, reference.next_logits())
        out.append(token)
        reference.append([token])

    session = engine.new_session()
    session.append(prompt)
    result = session.choose([o.ids for o in options])
    assert list(result.token_ids) == out
    assert list(session.history) == prompt + out
    assert chosen_move(options, result.token_ids).move in {*engine.adapters, ANSWER}
    assert result.decoded == len(out)


def test_a_constrained_soft_episode_loads_adapters_on_the_tiny_model(engine) -> None:
    policy = make_policy("soft", library=engine.adapters, constrained=True)
    free = EpisodeManager(engine, policy=make_policy("soft")).create()
    chosen = EpisodeManager(engine, policy=policy).create()

    async def main() -> None:
        config = AgentConfig(max_steps=6, max_new_tokens=8)
        await Agent(engine.tokenizer, None, config).run(free, "What is the capital of France?")
        await Agent(engine.tokenizer, None, config).run(chosen, "What is the capital of France?")

    anyio.run(main)
    assert free.status == "done", free.error
    assert free.control.loaded == []  # unconstrained, the random backbone loads nothing
    assert chosen.status == "done", chosen.error
    assert chosen.control.loaded, [m.get("content") for m in chosen.messages]
    assert set(chosen.control.loaded) <= set(engine.adapters)
    choices = [e for e in chosen.events if e["type"] == "choice"]
    assert choices
    assert choices[0]["move"] == chosen.control.loaded[0]
