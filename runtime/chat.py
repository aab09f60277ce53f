"""The chat format shared by the runtime and the trainers.

ChatML with tools, Qwen style. Python is the source of truth (`render_turns`); the Jinja
`CHAT_TEMPLATE` installed on tokenizers renders the same text, so `apply_chat_template` and
other engines (vLLM) see what the trainers trained on.

Rendering is prefix-stable: every turn closes with the special `<|im_end|>` and a newline, so
the tokens of `messages[:i]` are a prefix of the tokens of `messages[:i+1]`. The runtime appends
to its KV cache turn by turn and the trainers cut phase samples with the same `encode_turns`.

An assistant turn is tokenised in three pieces: the header `<|im_start|>assistant\\n` (prompt),
the body ending in `<|im_end|>` (what the model generates, the supervised span) and the closing
newline (prompt again).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
ASSISTANT_HEADER = f"{IM_START}assistant\n"
DEFAULT_SYSTEM = "You are a helpful research agent."
TOOL_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
# The two tools through which the agent switches its own weights (`runtime.lora_tools`).
LOAD_LORA = "load_lora"
OFFLOAD_LORA = "offload_lora"

Message = Mapping[str, Any]


class Tokenizer(Protocol):
    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_message_call(self) -> dict[str, Any]:
        """The OpenAI chat-completions shape used in trajectories."""
        return {"type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class ParsedReply:
    content: str
    calls: tuple[ToolCall, ...]
    errors: tuple[str, ...]


@dataclass(frozen=True)
class Turn:
    """One message's tokens; `supervised` is the span the model itself generates."""

    role: str
    ids: tuple[int, ...]
    supervised: slice


def tool_schema(
    name: str,
    description: str,
    properties: dict[str, Any] | None = None,
    required: Sequence[str] = (),
) -> dict[str, Any]:
    """A tool in the OpenAI `tools` shape that chat templates accept."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties or {},
                "required": list(required),
            },
        },
    }


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


def render_system(content: str | None, tools: Sequence[Mapping[str, Any]] | None) -> str:
    text = content if content is not None else DEFAULT_SYSTEM
    if tools:
        lines = "\n".join(_dumps(dict(t)) for t in tools)
        text += (
            "\n\n# Tools\n\nYou may call one or more functions. Function signatures are inside"
            f" <tools></tools>:\n<tools>\n{lines}\n</tools>\n\nCall a function with"
            ' <tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n'
            "</tool_call>"
        )
    return f"{IM_START}system\n{text}{IM_END}\n"


def _call_of(call: Mapping[str, Any]) -> ToolCall:
    fn = call.get("function", call)
    args = fn.get("arguments") or {}
    if isinstance(args, str):
        args = json.loads(args)
    return ToolCall(name=fn["name"], arguments=dict(args))


def format_calls(calls: Sequence[ToolCall]) -> str:
    return "\n".join(
        f"<tool_call>\n{_dumps({'name': c.name, 'arguments': c.arguments})}\n</tool_call>"
        for c in calls
    )


def assistant_body(message: Message) -> str:
    """The generated part of an assistant turn, without header and `<|im_end|>`."""
    calls = [_call_of(c) for c in message.get("tool_calls") or ()]
    parts = [message["content"]] if message.get("content") else []
    if calls:
        parts.append(format_calls(calls))
    return "\n".join(parts)


def render_message(message: Message) -> tuple[str, str, str]:
    """(prompt head, generated body, prompt tail) of one non-system message."""
    role = message["role"]
    if role == "assistant":
        return ASSISTANT_HEADER, assistant_body(message) + IM_END, "\n"
    content = message.get("content") or ""
    if role == "tool":
        content = f"<tool_response>\n{content}\n</tool_response>"
    elif role not in ("user", "system"):
        raise ValueError(f"unknown role {role!r}")
    return f"{IM_START}{role}\n{content}{IM_END}\n", "", ""


def render_turns(
    messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None
) -> list[tuple[str, str, str]]:
    """One (head, body, tail) per message; a leading system turn carries the tools.

    Without a system message first, a default system turn is prepended to the first message's
    head, so the result always has exactly one entry per message.
    """
    turns: list[tuple[str, str, str]] = []
    for i, message in enumerate(messages):
        if i == 0 and message["role"] == "system":
            turns.append((render_system(message.get("content"), tools), "", ""))
            continue
        head, body, tail = render_message(message)
        if i == 0:
            head = render_system(None, tools) + head
        turns.append((head, body, tail))
    return turns


def render(
    messages: Sequence[Message],
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = False,
) -> str:
    text = "".join(h + b + t for h, b, t in render_turns(messages, tools))
    if not messages:
        text = render_system(None, tools)
    return text + (ASSISTANT_HEADER if add_generation_prompt else "")


def encode_turns(
    tokenizer: Tokenizer, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None
) -> list[Turn]:
    """Tokens per message; concatenated they are the context the runtime holds."""
    out = []
    for message, (head, body, tail) in zip(messages, render_turns(messages, tools), strict=True):
        h = tokenizer.encode(head, add_special_tokens=False)
        b = tokenizer.encode(body, add_special_tokens=False) if body else []
        t = tokenizer.encode(tail, add_special_tokens=False) if tail else []
        out.append(Turn(message["role"], tuple(h + b + t), slice(len(h), len(h) + len(b))))
    return out


def encode(tokenizer: Tokenizer, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


def parse_reply(text: str) -> ParsedReply:
    """Split generated text into content and tool calls; malformed calls become errors."""
    text = text.removesuffix(IM_END)
    calls: list[ToolCall] = []
    errors: list[str] = []
    for raw in TOOL_CALL_RE.findall(text):
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            errors.append(f"tool call is not valid JSON: {exc.msg} at char {exc.pos}")
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            errors.append('tool call must be an object with a string "name"')
            continue
        args = obj.get("arguments", {})
        if not isinstance(args, dict):
            errors.append(f'tool call {obj["name"]!r}: "arguments" must be an object')
            continue
        calls.append(ToolCall(obj["name"], args))
    rest = TOOL_CALL_RE.sub("", text)
    if "<tool_call>" in rest or "</tool_call>" in rest:
        errors.append("unbalanced <tool_call> tags")
        rest = rest.replace("<tool_call>", "").replace("</tool_call>", "")
    return ParsedReply(rest.strip(), tuple(calls), tuple(errors))


# The same rendering as `render`, for tokenizers (apply_chat_template) and other engines.
# Every literal goes through an expression: transformers renders with trim_blocks/lstrip_blocks.
CHAT_TEMPLATE = (
    r"""
{%- macro system(content) -%}
  {{- '<|im_start|>system\n' + content -}}
  {%- if tools -%}
    {{- '\n\n# Tools\n\nYou may call one or more functions. Function signatures are inside'
        + ' <tools></tools>:\n<tools>\n' -}}
    {%- for t in tools -%}{{- t | tojson -}}{{- '\n' -}}{%- endfor -%}
    {{- '</tools>\n\nCall a function with <tool_call>\n'
        + '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>' -}}
  {%- endif -%}
  {{- '<|im_end|>\n' -}}
{%- endmacro -%}
{%- if messages and messages[0].role == 'system' -%}
  {{- system(messages[0].content) -}}
{%- else -%}
  {{- system('"""
    + DEFAULT_SYSTEM
    + r"""') -}}
{%- endif -%}
{%- for m in messages -%}
  {%- if m.role == 'assistant' -%}
    {{- '<|im_start|>assistant\n' -}}
    {%- generation -%}
      {%- if m.content -%}{{- m.content -}}{%- endif -%}
      {%- for c in m.tool_calls or [] -%}
        {%- if m.content or not loop.first -%}{{- '\n' -}}{%- endif -%}
        {%- set f = c.function if c.function is defined else c -%}
        {{- '<tool_call>\n{"name": ' + (f.name | tojson) + ', "arguments": '
            + (f.arguments | tojson) + '}\n</tool_call>' -}}
      {%- endfor -%}
      {{- '<|im_end|>' -}}
    {%- endgeneration -%}
    {{- '\n' -}}
  {%- elif m.role == 'tool' -%}
    {{- '<|im_start|>tool\n<tool_response>\n' + m.content + '\n</tool_response><|im_end|>\n' -}}
  {%- elif m.role == 'user' or not loop.first -%}
    {{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}
"""
)
