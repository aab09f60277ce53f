"""Phase samples: the loss mask is 1 exactly on capability k's turns and v_k."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trainer_helpers import TOOLS, assistant, call, phase, tool, trajectory, user

from runtime.chat import encode_turns
from trainers.phases import covered_capabilities, samples_of
from trainers.trajectory import parse_trajectory

WORDS = st.sampled_from(["plan", "search", "the", "report", "Paris", "é", "42", "{x}", "\n"])
TEXT = st.lists(WORDS, min_size=1, max_size=6).map(" ".join)
CAPS = st.sampled_from(["plan", "search", "write", "code"])


@dataclass
class Expected:
    """What the generator knows: per phase, its capability, supervised turns and end."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    phases: list[tuple[str, set[int], int]] = field(default_factory=list)

    def add(self, *messages: dict[str, Any]) -> list[int]:
        start = len(self.messages)
        self.messages.extend(messages)
        return list(range(start, len(self.messages)))


@st.composite
def trajectories(draw: st.DrawFn) -> Expected:
    out = Expected()
    if draw(st.booleans()):
        out.add({"role": "system", "content": draw(TEXT)})
    out.add(user(draw(TEXT)))
    n_phases = draw(st.integers(1, 4))
    for k in range(n_phases):
        if draw(st.booleans()):
            out.add(assistant(draw(TEXT)))  # the bare backbone speaks
        cap = draw(CAPS)
        load_content = draw(st.sampled_from(["", "Loading."]))
        out.add(assistant(load_content, call("load_lora", capability=cap)))
        out.add(tool("load_lora", draw(TEXT)))
        supervised: set[int] = set()
        for _ in range(draw(st.integers(0, 3))):
            kind = draw(st.sampled_from(["say", "search", "user"]))
            if kind == "say":
                supervised.update(out.add(assistant(draw(TEXT))))
            elif kind == "search":
                n = draw(st.integers(1, 2))
                calls = [call("search", query=draw(TEXT)) for _ in range(n)]
                supervised.update(
                    out.add(assistant(draw(st.sampled_from(["", "Look."])), *calls))[:1]
                )
                out.add(*[tool("search", draw(TEXT)) for _ in range(n)])
            else:
                out.add(user(draw(TEXT)))
        last = k == n_phases - 1
        if last and draw(st.booleans()):  # the trajectory ends inside the phase
            if supervised:
                out.phases.append((cap, supervised, len(out.messages)))
            return out
        closing = draw(st.sampled_from(["", "Done."]))
        supervised.update(out.add(assistant(closing, call("offload_lora"))))
        out.phases.append((cap, supervised, len(out.messages)))
        out.add(tool("offload_lora"))
    if draw(st.booleans()):
        out.add(assistant(draw(TEXT)))
    return out


def _owners(turns) -> list[tuple[int, bool]]:
    """For each token position: (message index, inside that message's supervised span)."""
    owners = []
    for i, turn in enumerate(turns):
        span = range(len(turn.ids))[turn.supervised]
        owners.extend((i, pos in span) for pos in range(len(turn.ids)))
    return owners


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(expected=trajectories())
def test_mask_is_exactly_capability_turns_and_offload(tokenizer, expected: Expected) -> None:
    traj = parse_trajectory(trajectory("t", *expected.messages))
    samples = samples_of(traj, tokenizer)
    assert [(s.capability, len(s.input_ids)) for s in samples] == [
        (cap, sum(len(t.ids) for t in encode_turns(tokenizer, expected.messages[:end], TOOLS)))
        for cap, _, end in expected.phases
    ]
    for sample, (cap, supervised, end) in zip(samples, expected.phases, strict=True):
        context = encode_turns(tokenizer, expected.messages[:end], TOOLS)
        # the sample is token-identical to what the runtime holds at that point
        assert list(sample.input_ids) == [i for t in context for i in t.ids]
        for (msg, in_span), bit in zip(_owners(context), sample.loss_mask, strict=True):
            role = expected.messages[msg]["role"]
            assert bit == int(msg in supervised and in_span), (msg, role)
            if role == "tool":
                assert bit == 0
        assert sample.capability == cap


def test_offload_turn_with_content_is_supervised_whole(tokenizer) -> None:
    messages = [
        user("Go"),
        *phase("plan", assistant("Step one."), closing="Plan ready."),
        *phase("search", assistant("", call("search", query="x")), tool("search", "RESULT")),
    ]
    traj = parse_trajectory(trajectory("t", *messages))
    plan, search = samples_of(traj, tokenizer)
    text = tokenizer.decode([i for i, m in zip(plan.input_ids, plan.loss_mask, strict=True) if m])
    assert text == (
        "Step one.<|im_end|>Plan ready.\n<tool_call>\n"
        '{"name": "offload_lora", "arguments": {}}\n</tool_call><|im_end|>'
    )
    supervised = tokenizer.decode(
        [i for i, m in zip(search.input_ids, search.loss_mask, strict=True) if m]
    )
    assert "RESULT" not in supervised
    assert "Step one" not in supervised
    assert '"load_lora"' not in supervised
    assert supervised.startswith('<tool_call>\n{"name": "search"')


def test_capability_filter_and_coverage(tokenizer) -> None:
    messages = [user("Go"), *phase("plan", assistant("a")), *phase("write", assistant("b"))]
    traj = parse_trajectory(trajectory("t", *messages))
    assert [s.capability for s in samples_of(traj, tokenizer, {"write"})] == ["write"]
    assert covered_capabilities(samples_of(traj, tokenizer)) == ["plan", "write"]
    assert samples_of(traj, tokenizer, {"code"}) == []


@pytest.mark.parametrize("closing", ["", "Done."])
def test_phase_with_only_offload_supervises_the_offload(tokenizer, closing: str) -> None:
    traj = parse_trajectory(trajectory("t", user("Go"), *phase("plan", closing=closing)))
    (sample,) = samples_of(traj, tokenizer)
    text = tokenizer.decode(
        [i for i, m in zip(sample.input_ids, sample.loss_mask, strict=True) if m]
    )
    assert text.endswith('{"name": "offload_lora", "arguments": {}}\n</tool_call><|im_end|>')
    assert text.startswith(closing or "<tool_call>")
