"""The constrained soft choice on vLLM: the same move as the reference engine on SmolLM2.

Each engine scores the tokens where the moves part ways after the question rendered under
every rotation of load_lora's listing (vLLM: one 1-token request per context and decision
point, `logprob_token_ids`); the log-probabilities must agree and the move must be the one
the reference engine takes, with no adapter and with one active.
"""

from __future__ import annotations

from typing import Any

import pytest
from vllm_support import QUESTIONS

from runtime.chat import ASSISTANT_HEADER, encode, encode_turns
from runtime.choice import choice_options, chosen_move, decisions, rotations
from runtime.lora_tools import lora_tool_schemas

pytestmark = pytest.mark.vllm


def contexts(engine: Any, question: str) -> list[list[int]]:
    """The question under each rotation of the order in which load_lora lists the library."""
    out = []
    for order in rotations(engine.adapters):
        tools = lora_tool_schemas(engine.adapters, order)
        turns = encode_turns(engine.tokenizer, [{"role": "user", "content": question}], tools)
        ids = [t for turn in turns for t in turn.ids]
        out.append(ids + encode(engine.tokenizer, ASSISTANT_HEADER))
    return out


def choose(engine: Any, ctxs: list[list[int]], config: str | None, options: list[Any]) -> Any:
    session = engine.new_session()
    try:
        session.append(ctxs[0])
        if config is not None:
            session.activate(config)
        opts = [o.ids for o in options]
        scored = session.score_branches(ctxs, decisions(opts))
        result = session.choose(opts, ctxs)
        assert list(session.history) == ctxs[0] + list(result.token_ids)
        return result.token_ids, scored.logprobs
    finally:
        session.close()


@pytest.mark.parametrize("config", [None, "plan"])
def test_vllm_chooses_the_move_the_reference_engine_chooses(
    vllm_engine: Any, peft_engine: Any, config: str | None
) -> None:
    options = choice_options(vllm_engine.tokenizer, vllm_engine.adapters, "Done.")
    moves = []
    for question in QUESTIONS[:2]:
        ctxs = contexts(vllm_engine, question)
        assert len(ctxs) == len(vllm_engine.adapters)
        got, vllm_lps = choose(vllm_engine, ctxs, config, options)
        want, peft_lps = choose(peft_engine, ctxs, config, options)
        assert got == want
        for v, p in zip(vllm_lps, peft_lps, strict=True):
            assert v.keys() == p.keys()
            for prefix in v:
                assert v[prefix] == pytest.approx(p[prefix], abs=2e-2)
        moves.append(chosen_move(options, got).move)
    assert set(moves) <= {*vllm_engine.adapters, "answer"}


def test_a_choice_after_a_phase_counts_its_rebuild_on_vllm(vllm_engine: Any) -> None:
    """As on the reference engine: the first choice rebuilds nothing, the adapter loaded
    after it rebuilds the opening, and the next choice re-processes the adapter's phase. A
    question no other test asks: vLLM's prefix cache is the engine's, and blocks another
    session cached are served, not rebuilt."""
    options = choice_options(vllm_engine.tokenizer, vllm_engine.adapters, "Done.")
    opts = [o.ids for o in options]
    ctxs = contexts(vllm_engine, "Which rebuild does a choice count after a phase?")
    session = vllm_engine.new_session()
    try:
        session.append(ctxs[0])
        first = session.choose(opts, ctxs)
        assert (first.rebuild_s, session.rebuilt_tokens) == (0.0, 0)
        session.activate("plan")
        assert session.generate(6).rebuild_s > 0
        session.deactivate()
        before = session.rebuilt_tokens
        header = encode(vllm_engine.tokenizer, ASSISTANT_HEADER)
        tail = list(session.history[len(ctxs[0]) :]) + header
        session.append(header)
        again = session.choose(opts, [c + tail for c in ctxs])
        assert 0 < again.rebuild_s <= again.prefill_s
        assert 0 < session.rebuilt_tokens - before <= again.prefilled
    finally:
        session.close()
