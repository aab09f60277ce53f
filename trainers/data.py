"""A deterministic generator of multi-phase research trajectories (demo, tests, benchmarks).

Each trajectory asks a question about a topic of the offline knowledge base and solves it in
phases, each under its own adapter: plan -> search (calls of the external `search` tool over
`runtime.kb`) -> write, optionally code. The bare backbone speaks between phases (it loads the
next adapter) and closes the episode. Same arguments, same trajectories, byte for byte.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from runtime import kb
from runtime.chat import tool_schema
from trainers.trajectory import Trajectory, parse_trajectory

DEFAULT_PHASES = ("plan", "search", "write")
WRITE_STYLES = ("plain", "markdown")
SYSTEM = (
    "You are a WeAct research agent. Load the adapter of the capability you need with "
    "load_lora, use it, then offload it with offload_lora."
)


def research_tools(capabilities: Sequence[str]) -> list[dict[str, Any]]:
    """load_lora / offload_lora (the weight-level actions) and the external search tool."""
    cap = {"type": "string", "enum": list(capabilities), "description": "capability to load"}
    query = {"type": "string", "description": "what to look for"}
    return [
        tool_schema(
            "load_lora", "Load a capability's adapter.", {"capability": cap}, ["capability"]
        ),
        tool_schema("offload_lora", "Offload the active adapter."),
        tool_schema(
            "search",
            "Search the offline knowledge base.",
            {"query": query, "k": {"type": "integer"}},
            ["query"],
        ),
    ]


def _documents() -> list[dict[str, Any]]:
    return [{"id": d.id, "title": d.title, "text": d.text} for d in kb.DOCUMENTS]


def _search(query: str, k: int) -> list[dict[str, Any]]:
    return [dict(hit) for hit in kb.search(query, k=k)]


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def _turn(content: str = "", *calls: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def _tool(name: str, payload: Any) -> dict[str, Any]:
    return {"role": "tool", "name": name, "content": json.dumps(payload, ensure_ascii=False)}


class _Episode:
    """Builds one trajectory's messages phase by phase."""

    def __init__(self, rng: random.Random, doc: dict[str, Any], write_style: str) -> None:
        self.rng = rng
        self.topic = doc["title"]
        self.queries = [self.topic, f"{self.topic} {rng.choice(['history', 'facts', 'use'])}"]
        self.hits: list[dict[str, Any]] = []
        self.write_style = write_style
        self.messages: list[dict[str, Any]] = []

    def run(self, phases: Sequence[str]) -> list[dict[str, Any]]:
        question = f"What do we know about {self.topic}? Write a short report with citations."
        self.messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": question},
        ]
        for cap in phases:
            self.messages += [_turn("", _call("load_lora", capability=cap))]
            self.messages += [_tool("load_lora", {"ok": True, "active": cap})]
            body, closing = getattr(self, f"_phase_{cap}")()
            self.messages += body
            self._close(closing)
        self.messages.append(_turn(f"Done: the report on {self.topic} is above."))
        return self.messages

    def _close(self, closing: str) -> None:
        """v_k: the offload call, with the phase's last words in the same turn or not."""
        if closing and self.rng.random() < 0.5:
            self.messages += [_turn(closing)]
            closing = ""
        self.messages += [_turn(closing, _call("offload_lora"))]
        self.messages += [_tool("offload_lora", {"ok": True, "active": None})]

    def _phase_plan(self) -> tuple[list[dict[str, Any]], str]:
        steps = [f"{n}. Search for {q}." for n, q in enumerate(self.queries, start=1)]
        steps.append(f"{len(steps) + 1}. Write a cited report.")
        return [], "Plan:\n" + "\n".join(steps)

    def _phase_search(self) -> tuple[list[dict[str, Any]], str]:
        body: list[dict[str, Any]] = []
        for query in self.queries:
            k = self.rng.choice([2, 3])
            hits = _search(query, k)
            body += [_turn("", _call("search", query=query, k=k)), _tool("search", hits)]
            self.hits += [h for h in hits if h["id"] not in {x["id"] for x in self.hits}]
        evidence = "; ".join(f"[{h['id']}] {h['title']}" for h in self.hits[:3])
        return body, f"Evidence: {evidence}."

    def _phase_write(self) -> tuple[list[dict[str, Any]], str]:
        cited = self.hits[:2] or [{"id": "none", "snippet": "no sources were found"}]
        if self.write_style == "markdown":
            points = "\n".join(f"- {h['snippet']} [{h['id']}]" for h in cited)
            sources = ", ".join(h["id"] for h in cited)
            return [], f"## {self.topic}\n\n{points}\n\nSources: {sources}"
        sentences = " ".join(f"{h['snippet']} [{h['id']}]." for h in cited)
        return [], f"Report on {self.topic}. {sentences}"

    def _phase_code(self) -> tuple[list[dict[str, Any]], str]:
        ids = [h["id"] for h in self.hits[:2]]
        code = f"def sources():\n    return {ids!r}\n"
        return [_turn(f"```python\n{code}```")], "The code lists the cited sources."


def generate(
    n: int,
    seed: int = 0,
    phases: Sequence[str] = DEFAULT_PHASES,
    write_style: str = "plain",
    id_prefix: str = "traj",
) -> list[Trajectory]:
    """`n` trajectories, each running `phases` in order; deterministic in every argument."""
    if write_style not in WRITE_STYLES:
        raise ValueError(f"write_style must be one of {WRITE_STYLES}, got {write_style!r}")
    unknown = set(phases) - {"plan", "search", "write", "code"}
    if unknown:
        raise ValueError(f"the generator knows plan, search, write and code, not {sorted(unknown)}")
    docs = _documents()
    tools = research_tools(sorted(set(phases) | set(DEFAULT_PHASES)))
    out = []
    for i in range(n):
        rng = random.Random(f"{seed}:{i}")
        messages = _Episode(rng, rng.choice(docs), write_style).run(phases)
        out.append(
            parse_trajectory(
                {"id": f"{id_prefix}-{seed}-{i}", "messages": messages, "tools": tools}
            )
        )
    return out
