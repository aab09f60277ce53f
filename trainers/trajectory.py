"""Trajectories: the JSONL training format, its validation and its phases.

One JSON object per line: `{"id", "messages": [...], "tools"?: [...]}` in the OpenAI chat
shape (see trainers/README.md for the JSON schema). Validation walks the messages once as a
state machine (which tool calls await a result, which adapter is active) and records the
phases: a `load_lora(capability)` call opens a phase, `offload_lora()` closes it. Every error
names the line, the trajectory and the field.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainers.errors import TrajectoryError

LOAD = "load_lora"
OFFLOAD = "offload_lora"
ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class Phase:
    """One capability's phase: messages `load` (the load_lora call) to `end` (exclusive).

    `start` is the first message of c_k (after the load's tool result); `offload` is the
    assistant turn that calls offload_lora (v_k), or None when the trajectory ends first.
    """

    capability: str
    load: int
    start: int
    offload: int | None
    end: int


@dataclass(frozen=True)
class Trajectory:
    id: str
    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...] = ()
    phases: tuple[Phase, ...] = field(default=(), compare=False)

    @property
    def capabilities(self) -> tuple[str, ...]:
        """The capabilities of its phases, in order of first appearance."""
        return tuple(dict.fromkeys(p.capability for p in self.phases))

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"id": self.id, "messages": [dict(m) for m in self.messages]}
        if self.tools:
            obj["tools"] = [dict(t) for t in self.tools]
        return obj


def parse_trajectory(obj: object) -> Trajectory:
    """Validate one decoded JSON object; raises TrajectoryError naming the field."""
    if not isinstance(obj, Mapping):
        raise TrajectoryError("a trajectory must be a JSON object")
    unknown = set(obj) - {"id", "messages", "tools"}
    if unknown:
        raise TrajectoryError(f"unknown keys {sorted(unknown)}", field="")
    tid = obj.get("id")
    if not isinstance(tid, str) or not tid:
        raise TrajectoryError("must be a non-empty string", field="id")
    try:
        tools = _tools(obj.get("tools", []))
        messages = obj.get("messages")
        if not isinstance(messages, list) or not messages:
            raise TrajectoryError("must be a non-empty list", field="messages")
        checked = tuple(_message(m, i) for i, m in enumerate(messages))
        phases = _Walker().walk(checked)
    except TrajectoryError as exc:
        raise TrajectoryError(exc.problem, field=exc.field, trajectory=tid) from None
    return Trajectory(tid, checked, tools, phases)


def _tools(tools: object) -> tuple[dict[str, Any], ...]:
    if not isinstance(tools, list):
        raise TrajectoryError("must be a list of tool schemas", field="tools")
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            raise TrajectoryError(
                'must be {"type": "function", "function": {"name", ...}}', field=f"tools[{i}]"
            )
    return tuple(dict(t) for t in tools)


def _message(m: object, i: int) -> dict[str, Any]:
    where = f"messages[{i}]"
    if not isinstance(m, Mapping):
        raise TrajectoryError("must be an object", field=where)
    role = m.get("role")
    if role not in ROLES:
        raise TrajectoryError(
            f"unknown role {role!r} (one of {', '.join(ROLES)})", field=f"{where}.role"
        )
    if role == "system" and i != 0:
        raise TrajectoryError("a system message may only come first", field=f"{where}.role")
    content = m.get("content")
    if role == "assistant":
        calls = _calls(m.get("tool_calls"), where)
        if content is not None and not isinstance(content, str):
            raise TrajectoryError("must be a string or null", field=f"{where}.content")
        if not content and not calls:
            raise TrajectoryError("an assistant turn needs content or tool_calls", field=where)
        out: dict[str, Any] = {"role": role, "content": content or ""}
        if calls:
            out["tool_calls"] = calls
        return out
    if not isinstance(content, str):
        raise TrajectoryError("must be a string", field=f"{where}.content")
    if role == "tool":
        name = m.get("name")
        if not isinstance(name, str) or not name:
            raise TrajectoryError("a tool message needs the tool's name", field=f"{where}.name")
        return {"role": role, "name": name, "content": content}
    if "tool_calls" in m:
        raise TrajectoryError(f"only assistant turns make tool calls, not {role}", field=where)
    return {"role": role, "content": content}


def _calls(calls: object, where: str) -> list[dict[str, Any]]:
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise TrajectoryError("must be a list", field=f"{where}.tool_calls")
    return [_call(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(calls)]


def _call(call: object, where: str) -> dict[str, Any]:
    if not isinstance(call, Mapping) or call.get("type", "function") != "function":
        raise TrajectoryError('must be {"type": "function", "function": {...}}', field=where)
    fn = call.get("function")
    if not isinstance(fn, Mapping):
        raise TrajectoryError("must be an object", field=f"{where}.function")
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise TrajectoryError("must be a non-empty string", field=f"{where}.function.name")
    args = fn.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError as exc:
            raise TrajectoryError(
                f"not valid JSON: {exc.msg}", field=f"{where}.function.arguments"
            ) from None
    if not isinstance(args, Mapping):
        raise TrajectoryError("must be an object", field=f"{where}.function.arguments")
    return {"type": "function", "function": {"name": name, "arguments": dict(args)}}


class _Walker:
    """The state machine over a trajectory's messages: pending tool calls, active adapter."""

    def __init__(self) -> None:
        self.pending: list[str] = []
        self.phases: list[Phase] = []
        self.active: tuple[str, int] | None = None  # (capability, index of the load call)

    def walk(self, messages: Sequence[dict[str, Any]]) -> tuple[Phase, ...]:
        for i, m in enumerate(messages):
            if m["role"] == "tool":
                self._answer(m, i)
                continue
            if self.pending:
                raise TrajectoryError(
                    f"tool call(s) {self.pending} have no tool result before this message",
                    field=f"messages[{i}]",
                )
            if m["role"] == "assistant":
                self._assistant(m, i)
        if self.pending:
            raise TrajectoryError(f"tool call(s) {self.pending} never answered", field="messages")
        if self.active is not None:
            cap, load = self.active
            self.phases.append(Phase(cap, load, load + 2, None, len(messages)))
        return tuple(self.phases)

    def _answer(self, m: Mapping[str, Any], i: int) -> None:
        if not self.pending:
            raise TrajectoryError(
                "a tool result that answers no pending call", field=f"messages[{i}]"
            )
        expected = self.pending.pop(0)
        if m["name"] != expected:
            raise TrajectoryError(
                f"answers {m['name']!r} but the pending call is {expected!r}",
                field=f"messages[{i}].name",
            )

    def _assistant(self, m: Mapping[str, Any], i: int) -> None:
        names = [c["function"]["name"] for c in m.get("tool_calls", [])]
        where = f"messages[{i}].tool_calls"
        if (LOAD in names or OFFLOAD in names) and len(names) > 1:
            raise TrajectoryError(
                f"{LOAD}/{OFFLOAD} must be the only tool call of its turn, got {names}", field=where
            )
        if names == [LOAD]:
            self._load(m["tool_calls"][0]["function"]["arguments"], i)
        elif names == [OFFLOAD]:
            self._offload(i)
        self.pending = names

    def _load(self, args: Mapping[str, Any], i: int) -> None:
        cap = args.get("capability")
        if not isinstance(cap, str) or not cap:
            raise TrajectoryError(
                "must be a non-empty string",
                field=f"messages[{i}].tool_calls[0].function.arguments.capability",
            )
        if self.active is not None:
            raise TrajectoryError(
                f"{LOAD}({cap!r}) while {self.active[0]!r} is active: offload it first",
                field=f"messages[{i}]",
            )
        self.active = (cap, i)

    def _offload(self, i: int) -> None:
        if self.active is None:
            raise TrajectoryError(f"{OFFLOAD}() with no adapter active", field=f"messages[{i}]")
        cap, load = self.active
        self.phases.append(Phase(cap, load, load + 2, i, i + 1))
        self.active = None


def read_trajectories(path: str | os.PathLike[str]) -> list[Trajectory]:
    """All trajectories of a JSONL file (blank lines skipped); ids must be unique."""
    return list(iter_trajectories(path))


def iter_trajectories(path: str | os.PathLike[str]) -> Iterator[Trajectory]:
    source = os.fspath(path)
    seen: dict[str, int] = {}
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            trajectory = _parse_line(line, n, source)
            if trajectory.id in seen:
                raise TrajectoryError(
                    f"duplicate id (first on line {seen[trajectory.id]})",
                    field="id",
                    line=n,
                    source=source,
                    trajectory=trajectory.id,
                )
            seen[trajectory.id] = n
            yield trajectory


def _parse_line(line: str, n: int, source: str) -> Trajectory:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise TrajectoryError(
            f"not valid JSON: {exc.msg} (column {exc.colno})", line=n, source=source
        ) from None
    try:
        return parse_trajectory(obj)
    except TrajectoryError as exc:
        tid = obj.get("id") if isinstance(obj, Mapping) else None
        raise exc.located(
            line=n, source=source, trajectory=tid if isinstance(tid, str) else None
        ) from None


def write_trajectories(path: str | os.PathLike[str], trajectories: Sequence[Trajectory]) -> Path:
    """One JSON object per line; key order kept (tool schemas render in that order)."""
    lines = (json.dumps(t.to_json(), ensure_ascii=False) for t in trajectories)
    target = Path(path)
    target.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return target
