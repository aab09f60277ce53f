from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime import chat

TOOLS = [
    chat.tool_schema(
        "load_lora", "Load an adapter", {"capability": {"type": "string"}}, ["capability"]
    ),
    chat.tool_schema("offload_lora", "Offload the active adapter"),
]


def _call(name: str, **arguments: object) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


CONVERSATION = [
    {"role": "user", "content": "Find the capital of France"},
    {"role": "assistant", "content": "", "tool_calls": [_call("load_lora", capability="plan")]},
    {"role": "tool", "name": "load_lora", "content": '{"ok": true}'},
    {"role": "assistant", "content": "Plan: search.", "tool_calls": [_call("offload_lora")]},
    {"role": "tool", "name": "offload_lora", "content": '{"ok": true}'},
    {"role": "assistant", "content": "Paris."},
]


@pytest.fixture(scope="module")
def tokenizer(tiny_backbone: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_backbone)


@pytest.mark.parametrize("system", [None, "Be brief."])
@pytest.mark.parametrize("generation_prompt", [False, True])
def test_jinja_template_renders_like_python(tokenizer, system, generation_prompt) -> None:
    messages = ([{"role": "system", "content": system}] if system else []) + CONVERSATION
    expected = chat.render(messages, TOOLS, add_generation_prompt=generation_prompt)
    got = tokenizer.apply_chat_template(
        messages, tools=TOOLS, tokenize=False, add_generation_prompt=generation_prompt
    )
    assert got == expected


def test_turns_are_prefix_stable(tokenizer) -> None:
    turns = chat.encode_turns(tokenizer, CONVERSATION, TOOLS)
    flat = [i for t in turns for i in t.ids]
    assert flat == tokenizer.encode(chat.render(CONVERSATION, TOOLS), add_special_tokens=False)
    for n in range(1, len(CONVERSATION)):
        shorter = chat.encode_turns(tokenizer, CONVERSATION[:n], TOOLS)
        assert [t.ids for t in shorter] == [t.ids for t in turns[:n]]


def test_supervised_span_is_the_generated_body(tokenizer) -> None:
    turn = chat.encode_turns(tokenizer, CONVERSATION, TOOLS)[3]
    body = tokenizer.decode(list(turn.ids[turn.supervised]))
    assert body == (
        'Plan: search.\n<tool_call>\n{"name": "offload_lora", "arguments": {}}\n</tool_call>'
        "<|im_end|>"
    )
    for role_turn in chat.encode_turns(tokenizer, CONVERSATION, TOOLS):
        if role_turn.role != "assistant":
            assert role_turn.supervised.stop == role_turn.supervised.start


def test_parse_reply_extracts_calls_and_reports_malformed_ones() -> None:
    reply = chat.parse_reply(
        'Thinking.\n<tool_call>\n{"name": "load_lora", "arguments": {"capability": "search"}}\n'
        '</tool_call>\n<tool_call>{"name": 3}</tool_call><tool_call>{oops</tool_call><|im_end|>'
    )
    assert reply.content == "Thinking."
    assert reply.calls == (chat.ToolCall("load_lora", {"capability": "search"}),)
    assert len(reply.errors) == 2


def test_parse_reply_round_trips_formatted_calls() -> None:
    calls = [
        chat.ToolCall("search", {"query": "capital of France", "k": 3}),
        chat.ToolCall("offload_lora"),
    ]
    reply = chat.parse_reply("Go.\n" + chat.format_calls(calls) + chat.IM_END)
    assert reply.calls == tuple(calls)
    assert reply.errors == ()


@given(st.text())
def test_parse_reply_never_raises(text: str) -> None:
    reply = chat.parse_reply(text)
    assert isinstance(reply.content, str)
