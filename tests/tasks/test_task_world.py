"""The one task world: its default world is the suite's, its gold trajectories follow the
phases and styles asked for, and the package imports nothing of the project."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from evals.suite import generate_suite
from tasks.errors import TaskSpecError
from tasks.research import default_world, sample_questions
from tasks.trajectories import ANSWER_PREFIX, CAPABILITIES, gold_messages
from trainers.tasks import generate, task_tools

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def test_the_default_world_is_the_research_suite_at_seed_0() -> None:
    world, suite = default_world(), generate_suite("research", seed=0)
    assert world.documents == suite.documents
    assert world.questions == suite.questions
    assert default_world() is world  # built once per process


def test_a_search_for_a_documents_title_finds_it_first() -> None:
    world = default_world()
    for doc in world.documents[::25]:
        assert world.index.search(doc.title, 1)[0]["id"] == doc.id


def test_sampled_questions_are_deterministic_and_fit_a_code_phase() -> None:
    assert sample_questions(5, 3, ("plan",)) == sample_questions(5, 3, ("plan",))
    assert sample_questions(5, 3, ("plan",)) != sample_questions(5, 4, ("plan",))
    coded = sample_questions(8, 0, ("plan", "code"))
    assert all(q.expression is not None for q in coded)


@pytest.mark.parametrize("phases", [("write", "plan"), ("plan", "search", "code", "write")])
def test_generated_trajectories_run_the_phases_asked_for(phases: tuple[str, ...]) -> None:
    trajectories = generate(4, seed=2, phases=phases)
    assert [t.id for t in trajectories] == [f"traj-2-{i}" for i in range(4)]
    for t in trajectories:
        loads = [
            c["function"]["arguments"]["capability"]
            for m in t.messages
            for c in m.get("tool_calls", ())
            if c["function"]["name"] == "load_lora"
        ]
        assert tuple(loads) == phases
        assert [s["function"]["name"] for s in t.tools] == [
            s["function"]["name"] for s in task_tools()
        ]


def test_markdown_write_cites_every_hop_and_keeps_the_answer_line() -> None:
    question = next(q for q in default_world().questions["train"] if q.kind == "place")
    index = default_world().index
    plain, markdown = (
        gold_messages(question, index, ("write",), style)[-3]["content"]
        for style in ("plain", "markdown")
    )
    assert plain.endswith(f"\n{ANSWER_PREFIX} {question.answer}")
    assert markdown.startswith(f"## {question.question}\n\n- ")
    assert markdown.endswith(f"\n\n{ANSWER_PREFIX} {question.answer}")
    assert [f"[{d}]" in markdown for d in question.supporting] == [True] * question.hops


def test_the_search_results_are_what_the_index_returns() -> None:
    question = default_world().questions["dev"][0]
    messages = gold_messages(question, default_world().index)
    calls = [m for m in messages if m.get("tool_calls")]
    results = [m for m in messages if m["role"] == "tool" and m["name"] == "search"]
    for result, query in zip(results, question.searches, strict=True):
        hits = json.loads(result["content"])
        assert hits == default_world().index.search(query, len(hits))
    assert calls[0]["tool_calls"][0]["function"]["arguments"] == {"capability": "plan"}


@pytest.mark.parametrize(
    ("phases", "style", "problem"),
    [
        (("dance",), "plain", "not \\['dance'\\]"),
        ((), "plain", "not none"),
        (("plan",), "fancy", "write_style"),
    ],
)
def test_unknown_phases_and_styles_are_refused(phases, style, problem) -> None:
    with pytest.raises(TaskSpecError, match=problem):
        generate(1, phases=phases, write_style=style)
    assert issubclass(TaskSpecError, ValueError)  # the CLI turns it into a usage error


def test_a_code_phase_without_arithmetic_is_refused() -> None:
    question = next(q for q in default_world().questions["train"] if q.expression is None)
    with pytest.raises(TaskSpecError, match="needs an expression"):
        gold_messages(question, default_world().index, ("code",))
    assert set(CAPABILITIES) == {"plan", "search", "code", "write"}


def _project_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names & {"storage", "registry", "runtime", "trainers", "evals", "cli", "migrations"}


def test_the_task_world_imports_nothing_of_the_project_lazily_or_not() -> None:
    offenders = {p.name: _project_imports(p) for p in sorted(TASKS.glob("*.py"))}
    assert {name: found for name, found in offenders.items() if found} == {}
    assert len(offenders) >= 9
