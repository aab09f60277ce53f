"""Gold trajectories: each question solved phase by phase, in the trainers' JSONL format.

plan (the gold sub-questions, numbered) -> search (one real BM25 search per hop; the tool
results are what the suite's MCP server returns; then offload) -> code for `number` questions (one
`calculate` call) -> write (the hop facts with their document ids, then `Answer: ...`).
The bare backbone loads each adapter and closes with `Done.`. The tools listed are exactly
what the runtime shows the model for a library of the suite's capabilities, so a phase sample
is token-identical to the context an evaluation episode holds at that point.
"""

from __future__ import annotations

import json
from typing import Any

from evals.calc import calculate
from evals.errors import SuiteSpecError
from evals.questions import Question
from evals.search import DEFAULT_K, MAX_K, SearchIndex
from evals.tools import TOOL_SCHEMAS
from runtime.engine import AdapterSpec
from runtime.lora_tools import lora_tool_schemas
from trainers.trajectory import Trajectory, parse_trajectory

CAPABILITIES = ("plan", "search", "code", "write")
SYSTEM = "You are a WeAct research agent."
DESCRIPTIONS = {
    "plan": "Split the question into sub-questions.",
    "search": "Search for each fact.",
    "code": "Compute with calculate.",
    "write": "Write the answer.",
}
ANSWER_PREFIX = "Answer:"
FINAL = "Done."


def suite_library(capabilities: tuple[str, ...] = CAPABILITIES) -> dict[str, AdapterSpec]:
    """Adapter specs as the suite describes its capabilities (paths are filled by a runner)."""
    return {c: AdapterSpec(c, "", description=DESCRIPTIONS[c]) for c in capabilities}


def suite_tools(capabilities: tuple[str, ...] = CAPABILITIES) -> list[dict[str, Any]]:
    """load_lora / offload_lora as the runtime renders them, then the suite's MCP tools."""
    return lora_tool_schemas(suite_library(capabilities)) + [dict(t) for t in TOOL_SCHEMAS]


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
    def __init__(self, question: Question, index: SearchIndex) -> None:
        self.q = question
        self.index = index

    def messages(self) -> list[dict[str, Any]]:
        out = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": self.q.question}]
        for cap in self.q.phases:
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
        raise SuiteSpecError(f"{self.q.id}: search {query!r} does not find {doc}")

    def _code(self) -> tuple[list[dict[str, Any]], str]:
        expression = self.q.expression
        if expression is None:
            raise SuiteSpecError(f"{self.q.id}: a code phase needs an expression")
        result = calculate(expression)
        body = [_turn("", _call("calculate", expression=expression))]
        body += [_tool("calculate", {"value": result})]
        return body, f"{expression} = {result}"

    def _write(self) -> tuple[list[dict[str, Any]], str]:
        sources = ", ".join(self.q.supporting)
        if self.q.expression is not None:
            cited = f"{self.q.expression} = {self.q.answer} [{sources}]."
        elif self.q.options:  # both facts, then the choice
            cited = "; ".join(f[:-1] for f in self.q.facts) + f" [{sources}]."
        else:
            cited = f"{self.q.facts[-1][:-1]} [{sources}]."
        return [], f"{cited}\n{ANSWER_PREFIX} {self.q.answer}"


def gold_trajectory(question: Question, index: SearchIndex) -> Trajectory:
    """The question solved by its gold phases, validated by the trainers' parser."""
    messages = _Gold(question, index).messages()
    return parse_trajectory({"id": question.id, "messages": messages, "tools": suite_tools()})
