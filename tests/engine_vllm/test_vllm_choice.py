"""The constrained soft choice on vLLM: the same move as the reference engine on SmolLM2.

vLLM scores each option's tokens after the history (prompt logprobs, one request per option,
all in flight); the masked greedy decode over those scores must pick what the reference
engine's logits processor picks, with no adapter and with one active.
"""

from __future__ import annotations

from typing import Any

import pytest
from vllm_support import QUESTIONS, chat_prompt

from runtime.choice import choice_options, chosen_move

pytestmark = pytest.mark.vllm


def choose(engine: Any, prompt: list[int], config: str | None, options: list[Any]) -> Any:
    session = engine.new_session()
    try:
        session.append(prompt)
        if config is not None:
            session.activate(config)
        result = session.choose([o.ids for o in options])
        assert list(session.history) == prompt + list(result.token_ids)
        return result.token_ids
    finally:
        session.close()


@pytest.mark.parametrize("config", [None, "plan"])
def test_vllm_chooses_the_move_the_reference_engine_chooses(
    vllm_engine: Any, peft_engine: Any, config: str | None
) -> None:
    options = choice_options(vllm_engine.tokenizer, sorted(vllm_engine.adapters), "Done.")
    moves = []
    for question in QUESTIONS[:3]:
        prompt = chat_prompt(vllm_engine.tokenizer, question)
        got = choose(vllm_engine, prompt, config, options)
        assert got == choose(peft_engine, prompt, config, options)
        moves.append(chosen_move(options, got).move)
    assert set(moves) <= {*vllm_engine.adapters, "answer"}
