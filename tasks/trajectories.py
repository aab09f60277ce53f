"""Gold trajectories: each question solved phase by phase, as chat messages.

plan (the gold sub-questions, numbered) -> search (one real BM25 search per hop; the tool
results are what the task world's MCP server returns; then offload) -> code for `number`
questions (one `calculate` call) -> write (the hop facts with their document ids, then
`Answer: ...`). The bare backbone loads each adapter and closes with `Done.`. The research
suite runs each question's own phases; `weact data generate` may ask for another order and
a `markdown` write. The messages are plain dicts: a caller adds the tools its runtime shows
(`trainers.tasks` does) and parses them into a trajectory.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tasks.calc import calculate
from tasks.errors import TaskSpecError
from tasks.questions import Question
from tasks.search import DEFAULT_K, MAX_K, SearchIndex

CAPABILITIES = ("plan", "search", "code", "write")
WRITE_STYLES = ("plain", "markdown")
SYSTEM = "You are a WeAct research agent."
DESCRIPTIONS = {
    "plan": "Split the question into sub-questions.",
    "search": "Search for each fact.",
    "code": "Compute with calculate.",
    "write": "Write the answer.",
}
ANSWER_PREFIX = "Answer:"
FINAL = "Done."


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def _turn(content: str, *calls: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def _tool(name: str, payload: Any) -> dict[str, Any]:
    return {"role": "tool", "name": name, "content": json.dumps(payload, ensure_ascii=False)}


class _Gold:
    def __init__(self, question: Question, index: SearchIndex, write_style: str) -> None:
        self.q = question
        self.index = index
        self.write_style = write_style

    def messages(self, phases: Sequence[str]) -> list[dict[str, Any]]:
        out = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": self.q.question}]
        for cap in phases:
            out += [_turn("", _call("load_lora", capability=cap))]
            out += [_tool("load_lora", {"ok": True, "active": cap})]
            body, closing = getattr(self, f"_{cap}")()
            out += body
            out += [_turn(closing, _call("offload_lora"))]
            out += [_tool("offload_lora", {"ok": True, "active": None})]
        out.append(_turn(FINAL))
        return out

    def _plan(self) -> tuple[list[dict[str, Any]], str]:
        steps = [f"{n}. {sq}" for n, sq in enumerate(self.q.subquestions, start=1)]
        return [], "\n".join(steps)

    def _search(self) -> tuple[list[dict[str, Any]], str]:
        body: list[dict[str, Any]] = []
        for query, doc in zip(self.q.searches, self.q.supporting, strict=True):
            k, hits = self._hits(query, doc)
            args: dict[str, Any] = {"query": query} if k == DEFAULT_K else {"query": query, "k": k}
            body += [_turn("", _call("search", **args)), _tool("search", hits)]
        return body, ""

    def _hits(self, query: str, doc: str) -> tuple[int, list[dict[str, Any]]]:
        """The smallest k (from the default) whose results hold the hop's gold document."""
        for k in range(DEFAULT_K, MAX_K + 1):
            hits = self.index.search(query, k)
            if any(h["id"] == doc for h in hits):
                return k, hits
        raise TaskSpecError(f"{self.q.id}: search {query!r} does not find {doc}")

    def _code(self) -> tuple[list[dict[str, Any]], str]:
        expression = self.q.expression
        if expression is None:
            raise TaskSpecError(f"{self.q.id}: a code phase needs an expression")
        result = calculate(expression)
        body = [_turn("", _call("calculate", expression=expression))]
        body += [_tool("calculate", {"value": result})]
        return body, f"{expression} = {result}"

    def _write(self) -> tuple[list[dict[str, Any]], str]:
        if self.write_style == "markdown":
            return [], self._markdown()
        sources = ", ".join(self.q.supporting)
        if self.q.expression is not None:
            cited = f"{self.q.expression} = {self.q.answer} [{sources}]."
        elif self.q.options:  # both facts, then the choice
            cited = "; ".join(f[:-1] for f in self.q.facts) + f" [{sources}]."
        else:
            cited = f"{self.q.facts[-1][:-1]} [{sources}]."
        return [], f"{cited}\n{ANSWER_PREFIX} {self.q.answer}"

    def _markdown(self) -> str:
        """A heading, one bullet per hop fact with its document, then the answer line."""
        hops = zip(self.q.facts, self.q.supporting, strict=True)
        points = [f"- {fact[:-1]} [{doc}]" for fact, doc in hops]
        if self.q.expression is not None:
            points.append(f"- {self.q.expression} = {self.q.answer}")
        body = "\n".join(points)
        return f"## {self.q.question}\n\n{body}\n\n{ANSWER_PREFIX} {self.q.answer}"


def check_phases(phases: Sequence[str], write_style: str = "plain") -> None:
    """`TaskSpecError` unless every phase is a capability of the world and the style known."""
    if write_style not in WRITE_STYLES:
        raise TaskSpecError(f"write_style must be one of {WRITE_STYLES}, got {write_style!r}")
    unknown = sorted(set(phases) - set(CAPABILITIES))
    if unknown or not phases:
        known = ", ".join(CAPABILITIES)
        raise TaskSpecError(f"phases are some of {known}, not {unknown or 'none'}")


def gold_messages(
    question: Question,
    index: SearchIndex,
    phases: Sequence[str] | None = None,
    write_style: str = "plain",
) -> list[dict[str, Any]]:
    """The question solved phase by phase (its own phases unless `phases` says otherwise)."""
    order = question.phases if phases is None else tuple(phases)
    check_phases(order, write_style)
    return _Gold(question, index, write_style).messages(order)
