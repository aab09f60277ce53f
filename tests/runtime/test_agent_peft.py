"""An end-to-end episode on the real PeftEngine over the tiny model.

The tiny model writes random text, so the replies are scripted (teacher forcing through
`ForcedEngine`); every token still runs through the real forward pass under the adapter the
agent loaded, with the engine's real caches, prefetch and switches.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import torch
from support.engines import ForcedEngine, by_adapter, call

from runtime import chat
from runtime.agent import Agent, AgentConfig
from runtime.engine import AdapterSpec
from runtime.episode import EpisodeManager
from runtime.lora_tools import DEFAULT_DESCRIPTIONS
from runtime.mcp_client import McpToolbox
from runtime.policy import HardPolicy
from tasks.tools import serve_default_tools

SCRIPT = {
    None: [
        call("load_lora", capability="plan"),
        call("load_lora", capability="search"),
        call("load_lora", capability="write"),
    ],
    "plan": ["Plan: find the capital.\n" + call("offload_lora")],
    "search": [call("search", query="capital of France", k=1), call("offload_lora")],
    "write": ["Paris is the capital of France."],
}


@pytest.fixture(scope="module")
def peft_engine(tiny_backbone: Path, tiny_adapters: dict[str, Path]):
    from runtime.engines.peft import PeftEngine

    specs = [
        AdapterSpec(name, str(path), description=DEFAULT_DESCRIPTIONS[name])
        for name, path in tiny_adapters.items()
    ]
    return PeftEngine(tiny_backbone, specs)


def run(engine, task: str):
    episode = EpisodeManager(engine, policy=HardPolicy()).create()

    async def main():
        async with McpToolbox([serve_default_tools()]) as toolbox:
            agent = Agent(engine.tokenizer, toolbox, AgentConfig(max_steps=10))
            await agent.run(episode, task)
            return agent.tools(episode)

    return episode, anyio.run(main)


def test_episode_on_the_tiny_model(peft_engine) -> None:
    engine = ForcedEngine(peft_engine, by_adapter(SCRIPT))
    episode, tools = run(engine, "What is the capital of France?")
    assert episode.status == "done", episode.error
    assert episode.answer == "Paris is the capital of France."
    assert episode.control.loaded == ["plan", "search", "write"]
    session = engine.sessions[0]
    inner = session.inner
    # The token history is exactly the rendered conversation, generated turns included.
    history = peft_engine.tokenizer.decode(list(inner.history))
    assert history == chat.render(episode.messages, tools)
    # The write adapter was prefetched (really prefilled) while the search tool ran.
    inner.wait_prefetch()
    assert [p.config for p in inner.prefetched] == ["write"]
    assert inner.prefetched[0].tokens > 0
    assert sum(s.switch_s for s in episode.steps) >= 0.0
    assert [s.active for s in episode.steps if s.decoded] == [
        None,
        "plan",
        None,
        "search",
        "search",
        None,
        "write",
    ]
    _check_steps_ran_under_their_adapters(peft_engine, session)


def _check_steps_ran_under_their_adapters(peft_engine, session) -> None:
    configs = [config for config, _ in session.first_logits]
    assert configs == [None, "plan", None, "search", "search", None, "write"]
    # Recompute the write step's first logits from scratch under each configuration.
    write_logits = session.first_logits[-1][1]
    prefix = _prefix_before_last_reply(session.inner.history, peft_engine.tokenizer)
    fresh = {}
    for config in (None, "plan", "write"):
        probe = peft_engine.new_session()
        probe.append(prefix)
        if config is not None:
            probe.activate(config)
        fresh[config] = probe.next_logits()
        probe.close()
    assert torch.allclose(write_logits, fresh["write"], atol=1e-4)
    assert not torch.allclose(write_logits, fresh[None], atol=1e-2)
    assert not torch.allclose(write_logits, fresh["plan"], atol=1e-2)


def _prefix_before_last_reply(history, tokenizer) -> list[int]:
    """History up to (and including) the last assistant header."""
    header = tokenizer.encode(chat.ASSISTANT_HEADER, add_special_tokens=False)
    ids = list(history)
    for start in range(len(ids) - len(header), -1, -1):
        if ids[start : start + len(header)] == header:
            return ids[: start + len(header)]
    raise AssertionError("no assistant header in the history")
