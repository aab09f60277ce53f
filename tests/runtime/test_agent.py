"""The agent loop over scripted model outputs: policies, tool errors, history, records."""

from __future__ import annotations

import json

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.engines import ScriptedEngine, by_adapter, call

from runtime import chat
from runtime.agent import Agent, AgentConfig
from runtime.episode import EpisodeManager
from runtime.mcp_client import McpToolbox
from runtime.policy import HardPolicy, SoftPolicy
from tasks.research import default_world
from tasks.tools import serve_default_tools

# a city of the task world: a search for its name finds its own document first
CITY = next(d for d in default_world().documents if "-city-" in d.entity)
TASK = f"When was {CITY.title} founded?"
FULL_RUN = {
    None: [
        call("load_lora", capability="plan"),
        call("load_lora", capability="search"),
        call("load_lora", capability="write"),
    ],
    "plan": ["Plan: look up the capital.\n" + call("offload_lora")],
    "search": [call("search", query=CITY.title, k=1), call("offload_lora")],
    "write": ["Paris is the capital of France."],
}


def run_episode(engine, policy, *, toolbox_targets=(), config=None):
    manager = EpisodeManager(engine, policy=policy)
    episode = manager.create()

    async def main():
        async with McpToolbox(list(toolbox_targets)) as toolbox:
            agent = Agent(engine.tokenizer, toolbox, config or AgentConfig(max_steps=12))
            await agent.run(episode, TASK)
            return agent.tools(episode)

    tools = anyio.run(main)
    return episode, tools


def test_hard_episode_with_external_search() -> None:
    engine = ScriptedEngine(script=by_adapter(FULL_RUN))
    episode, tools = run_episode(engine, HardPolicy(), toolbox_targets=[serve_default_tools()])
    assert episode.status == "done", episode.error
    assert episode.answer == "Paris is the capital of France."
    assert episode.finish_reason == "answer"
    phases = [None, "plan", None, "search", "search", None, "write"]
    assert [s.active for s in episode.steps] == phases
    assert episode.control.loaded == ["plan", "search", "write"]
    assert not any(s.forced for s in episode.steps)
    # The search phase's tool call ran over MCP and its result is in the conversation.
    results = [m for m in episode.messages if m["role"] == "tool" and m["name"] == "search"]
    assert json.loads(results[0]["content"])[0]["id"] == CITY.id
    # While it ran, the session prefetched the next adapter of the order.
    session = engine.sessions[0]
    assert [p.config for p in session.prefetches] == ["write"]
    assert [t["function"]["name"] for t in tools] == [
        "load_lora",
        "offload_lora",
        "search",
        "fetch_document",
        "calculate",
    ]


def test_history_is_the_rendered_conversation() -> None:
    engine = ScriptedEngine(script=by_adapter(FULL_RUN))
    episode, tools = run_episode(engine, HardPolicy(), toolbox_targets=[serve_default_tools()])
    history = engine.tokenizer.decode(list(engine.sessions[0].history))
    assert history == chat.render(episode.messages, tools)


def test_hard_policy_loads_the_next_adapter_when_the_model_stops() -> None:
    engine = ScriptedEngine(script=["I would plan.", "I would search.", "Draft.", "Final."])
    episode, _ = run_episode(engine, HardPolicy())
    assert episode.answer == "Final."
    assert episode.control.loaded == ["plan", "search", "write"]
    forced = [s for s in episode.steps if s.forced]
    assert [s.tool_calls for s in forced] == [
        ("load_lora",),
        ("offload_lora", "load_lora"),
        ("offload_lora", "load_lora"),
    ]
    generated = [s.active for s in episode.steps if not s.forced]
    assert generated == [None, "plan", "search", "write"]
    # The runtime's own switch is in the conversation as a call and its result.
    forced_turns = [m for m in episode.messages if m["role"] == "assistant" and not m["content"]]
    assert len(forced_turns) == 3


def test_out_of_order_load_is_a_tool_error_the_model_recovers_from() -> None:
    script = {
        None: [call("load_lora", capability="write"), call("load_lora", capability="plan")],
        "plan": ["Planned."],
        "search": ["Found."],
        "write": ["Done."],
    }
    engine = ScriptedEngine(script=by_adapter(script))
    episode, _ = run_episode(engine, HardPolicy())
    errors = [json.loads(m["content"]) for m in episode.messages if m["role"] == "tool"]
    assert "load 'plan' next, not 'write'" in errors[0]["error"]
    assert episode.answer == "Done."
    assert episode.control.loaded == ["plan", "search", "write"]


def test_soft_policy_lets_the_backbone_choose() -> None:
    script = {None: [call("load_lora", capability="write")], "write": ["Paris."]}
    engine = ScriptedEngine(script=by_adapter(script))
    episode, _ = run_episode(engine, SoftPolicy())
    assert episode.answer == "Paris."
    assert episode.control.loaded == ["write"]
    assert not any(s.forced for s in episode.steps)


def test_soft_policy_prefetches_its_guess_during_external_calls() -> None:
    script = {
        None: [call("load_lora", capability="search")],
        "search": [call("search", query=CITY.title), "Everest is 8,849 metres."],
    }
    engine = ScriptedEngine(script=by_adapter(script))
    episode, _ = run_episode(
        engine, SoftPolicy({"search": "write"}), toolbox_targets=[serve_default_tools()]
    )
    assert episode.answer == "Everest is 8,849 metres."
    assert [p.config for p in engine.sessions[0].prefetches] == ["write"]
    assert any(e["type"] == "prefetch" for e in episode.events)


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ("<tool_call>{oops</tool_call>", "not valid JSON"),
        ('<tool_call>{"name": 3}</tool_call>', 'string "name"'),
        ('<tool_call>{"name": "load_lora", "arguments": [1]}</tool_call>', "must be an object"),
        ('<tool_call>{"name": "load_lora"', "unbalanced"),
        (call("browse", url="x"), "unknown tool 'browse'"),
        (call("load_lora", capability="code"), "available: plan, search, write"),
        (call("offload_lora"), "nothing to offload"),
    ],
)
def test_malformed_calls_become_tool_errors(reply, error) -> None:
    engine = ScriptedEngine(script=[reply, "Recovered."])
    episode, _ = run_episode(engine, SoftPolicy())
    assert episode.status == "done"
    assert episode.answer == "Recovered."
    tool_turns = [m for m in episode.messages if m["role"] == "tool"]
    assert len(tool_turns) == 1
    assert error in json.loads(tool_turns[0]["content"])["error"]
    assert engine.sessions[0].active is None


def test_step_budget_ends_the_episode() -> None:
    engine = ScriptedEngine(script=[call("offload_lora")] * 10)
    episode, _ = run_episode(engine, SoftPolicy(), config=AgentConfig(max_steps=3))
    assert episode.status == "done"
    assert episode.finish_reason == "max_steps"
    assert episode.answer is None
    assert len(episode.steps) == 3


def test_a_phase_that_never_offloads_is_cut_after_max_phase_steps() -> None:
    """Runtime switches: a search adapter that keeps calling its tool gets 3 generations,
    then the runtime offloads it and loads write; without the cap it spends the episode."""
    script = {
        "plan": ["1. Find the capital.\n" + call("offload_lora")],
        "search": [call("search", query=CITY.title, k=1)] * 20,
        "write": ["Paris is the capital of France.\n" + call("offload_lora")],
    }
    capped = AgentConfig(max_steps=12, runtime_switches=True, max_phase_steps=3)
    engine = ScriptedEngine(script=by_adapter(script))
    episode, _ = run_episode(
        engine, HardPolicy(), toolbox_targets=[serve_default_tools()], config=capped
    )
    assert episode.finish_reason == "answer"
    assert episode.answer == "Paris is the capital of France."
    generated = [s.active for s in episode.steps if not s.forced]
    assert generated == ["plan", "search", "search", "search", "write"]
    assert episode.steps[-2].forced
    assert episode.steps[-2].tool_calls == ("offload_lora", "load_lora")

    uncapped = AgentConfig(max_steps=12, runtime_switches=True)
    engine = ScriptedEngine(script=by_adapter(script))
    episode, _ = run_episode(
        engine, HardPolicy(), toolbox_targets=[serve_default_tools()], config=uncapped
    )
    assert episode.finish_reason == "max_steps"
    assert episode.control.loaded == ["plan", "search"]


def test_a_reply_cut_by_the_token_budget_still_closes_its_turn() -> None:
    engine = ScriptedEngine(script=["x" * 50, "short"])
    episode, tools = run_episode(
        engine, SoftPolicy(), config=AgentConfig(max_steps=1, max_new_tokens=10)
    )
    assert episode.steps[0].finish_reason == "length"
    history = engine.tokenizer.decode(list(engine.sessions[0].history))
    assert history.endswith(chat.ASSISTANT_HEADER + "x" * 10 + chat.IM_END + "\n")


def test_step_records_and_events() -> None:
    engine = ScriptedEngine(script=by_adapter(FULL_RUN))
    episode, _ = run_episode(engine, HardPolicy(), toolbox_targets=[serve_default_tools()])
    first, second = episode.steps[:2]
    assert first.prefilled > 0
    assert first.cache_hit == 0
    assert second.decoded > 0
    assert second.prefilled > 0  # a new configuration processes the whole history
    kinds = [e["type"] for e in episode.events]
    assert (kinds[0], kinds[-1]) == ("start", "done")
    assert kinds.count("switch") == 5  # plan, off, search, off, write
    tokens = "".join(e["text"] for e in episode.events if e["type"] == "token")
    assert "Paris is the capital of France." in tokens
    totals = episode.to_json()["totals"]
    assert totals["decoded"] == sum(s.decoded for s in episode.steps)
    assert 0.0 <= totals["switch_share"] <= 1.0


def test_a_failing_engine_fails_the_episode_not_the_caller() -> None:
    engine = ScriptedEngine(script=[])  # the script runs dry on the first step
    episode, _ = run_episode(engine, SoftPolicy())
    assert episode.status == "failed"
    assert "no more replies" in episode.error
    assert list(episode.events)[-1]["type"] == "done"


FRAGMENTS = st.one_of(
    st.sampled_from(["plan", "search", "write", "code", ""]).map(
        lambda c: call("load_lora", capability=c)
    ),
    st.just(call("offload_lora")),
    st.just(call("offload_lora", capability="plan")),
    st.just(call("search", query="Paris")),
    st.sampled_from(["<tool_call>{", "</tool_call>", '<tool_call>{"name": 1}</tool_call>']),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.lists(FRAGMENTS, min_size=1, max_size=3).map("\n".join), min_size=1, max_size=6),
    st.sampled_from(["hard", "soft"]),
)
def test_any_model_output_keeps_the_episode_consistent(replies, kind) -> None:
    """Whatever the model writes, the loop never crashes and its state stays legal."""
    engine = ScriptedEngine(script=replies)
    policy = HardPolicy() if kind == "hard" else SoftPolicy()
    episode, _ = run_episode(engine, policy, config=AgentConfig(max_steps=len(replies)))
    assert episode.status == "done", episode.error
    assert episode.finish_reason in ("answer", "max_steps")
    session = engine.sessions[0]
    assert session.active in (None, "plan", "search", "write")
    for message in episode.messages:
        if message["role"] == "tool":
            json.loads(message["content"])  # every tool result is JSON for the model
    if kind == "hard":
        assert episode.control.loaded == ["plan", "search", "write"][: len(episode.control.loaded)]
    history = engine.tokenizer.decode(list(session.history))
    assert history.count(chat.ASSISTANT_HEADER) == sum(
        m["role"] == "assistant" for m in episode.messages
    )


def test_a_cancelled_episode_says_so() -> None:
    import threading

    gate = threading.Event()

    def blocking(session):
        gate.wait(5)
        return call("offload_lora")  # a reply that needs another step

    engine = ScriptedEngine(script=blocking)
    episode = EpisodeManager(engine, policy=SoftPolicy()).create()

    async def main():
        async with anyio.create_task_group() as tg:
            tg.start_soon(Agent(engine.tokenizer).run, episode, TASK)
            await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
            gate.set()  # the generate call in flight finishes; the loop stops at its next await

    anyio.run(main)
    assert episode.status == "cancelled"
    assert list(episode.events)[-1]["status"] == "cancelled"


def test_the_episode_token_budget_cuts_a_rambling_model() -> None:
    """Every reply is a full-length tool call: without a budget the episode spends all its
    steps; with one, the last generation gets what is left and the episode stops."""
    reply = call("search", query="q")
    n = len(ScriptedEngine(script=[]).tokenizer.encode(reply)) + 1  # and its end-of-turn token

    def run(budget: int | None) -> tuple[str | None, list[int]]:
        config = AgentConfig(max_steps=8, max_new_tokens=n, max_episode_tokens=budget)
        engine = ScriptedEngine(script=[reply] * 10)
        episode, _ = run_episode(
            engine, SoftPolicy(), toolbox_targets=[serve_default_tools()], config=config
        )
        return episode.finish_reason, [s.decoded for s in episode.steps]

    assert run(2 * n) == ("max_tokens", [n, n])
    assert run(2 * n + 3)[1] == [n, n, 3]  # the cut call is text: the soft policy's answer
    assert run(None) == ("max_steps", [n] * 8)
