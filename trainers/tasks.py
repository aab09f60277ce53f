"""The task world's gold trajectories in the trainers' format, with the tools the runtime shows.

`tasks` writes the messages; this module adds the tool list a WeAct runtime renders for a
library of the world's capabilities (load_lora / offload_lora from `runtime.lora_tools`, then the
task world's MCP tools) and validates each record with the trainers' parser. The research
suite's gold trajectories and `weact data generate` both come from here, so a phase sample
is token-identical to the context an evaluation episode holds at that point.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runtime.engine import AdapterSpec
from runtime.lora_tools import lora_tool_schemas
from tasks.questions import Question
from tasks.research import sample_questions
from tasks.search import SearchIndex
from tasks.tools import TOOL_SCHEMAS
from tasks.trajectories import CAPABILITIES, DESCRIPTIONS, check_phases, gold_messages
from trainers.trajectory import Trajectory, parse_trajectory

DEFAULT_PHASES = ("plan", "search", "write")


def task_library(capabilities: Sequence[str] = CAPABILITIES) -> dict[str, AdapterSpec]:
    """Adapter specs as the task world describes its capabilities (paths filled by a runner)."""
    return {c: AdapterSpec(c, "", description=DESCRIPTIONS[c]) for c in capabilities}


def task_tools(capabilities: Sequence[str] = CAPABILITIES) -> list[dict[str, Any]]:
    """load_lora / offload_lora as the runtime renders them, then the world's MCP tools."""
    return lora_tool_schemas(task_library(capabilities)) + [dict(t) for t in TOOL_SCHEMAS]


def gold_trajectory(
    question: Question,
    index: SearchIndex,
    phases: Sequence[str] | None = None,
    write_style: str = "plain",
    trajectory_id: str | None = None,
) -> Trajectory:
    """The question solved by its gold phases (or `phases`), validated by the parser."""
    messages = gold_messages(question, index, phases, write_style)
    record = {"id": trajectory_id or question.id, "messages": messages, "tools": task_tools()}
    return parse_trajectory(record)


def generate(
    n: int,
    seed: int = 0,
    phases: Sequence[str] = DEFAULT_PHASES,
    write_style: str = "plain",
    id_prefix: str = "traj",
) -> list[Trajectory]:
    """`n` gold trajectories over the default world, each running `phases` in order;
    deterministic in every argument (`weact data generate`)."""
    from tasks.research import default_world

    check_phases(phases, write_style)
    index = default_world().index
    return [
        gold_trajectory(q, index, phases, write_style, f"{id_prefix}-{seed}-{i}")
        for i, q in enumerate(sample_questions(n, seed, phases))
    ]
