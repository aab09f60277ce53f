"""Builders of chat messages for the trainers' tests."""

from __future__ import annotations

from typing import Any

from runtime.chat import tool_schema

TOOLS = [
    tool_schema("load_lora", "Load an adapter", {"capability": {"type": "string"}}, ["capability"]),
    tool_schema("offload_lora", "Offload the active adapter"),
    tool_schema("search", "Search the knowledge base", {"query": {"type": "string"}}, ["query"]),
]


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def assistant(content: str = "", *calls: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def tool(name: str, content: str = '{"ok": true}') -> dict[str, Any]:
    return {"role": "tool", "name": name, "content": content}


def user(content: str) -> dict[str, Any]:
    return {"role": "user", "content": content}


def phase(capability: str, *body: dict[str, Any], closing: str = "") -> list[dict[str, Any]]:
    """load_lora exchange, the phase's messages, the offload turn and its result."""
    return [
        assistant("", call("load_lora", capability=capability)),
        tool("load_lora", f'{{"ok": true, "active": "{capability}"}}'),
        *body,
        assistant(closing, call("offload_lora")),
        tool("offload_lora"),
    ]


def short(trajectories: list) -> list:
    """The same trajectories without tool schemas: shorter samples, faster tests."""
    from dataclasses import replace

    return [replace(t, tools=()) for t in trajectories]


def trajectory(tid: str, *messages: dict[str, Any], tools: list | None = None) -> dict[str, Any]:
    return {"id": tid, "messages": list(messages), "tools": TOOLS if tools is None else tools}
