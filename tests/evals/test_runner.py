"""The evaluation runner on the tiny model: real agent loop, concurrent episodes, resumable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.runner import (
    EpisodeSettings,
    ItemResult,
    ResultsMismatchError,
    run_suite,
)
from evals.scoring import ItemScore
from evals.suite import Suite
from tasks.trajectories import CAPABILITIES, DESCRIPTIONS

FAST = {"max_steps": 6, "max_new_tokens": 6, "concurrency": 3}
WEIGHTS = "0" * 64  # what the results files say the backbone's manifest root is


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from runtime.engine import AdapterSpec
    from runtime.engines.peft import PeftEngine
    from runtime.tiny import build_tiny_adapter, build_tiny_backbone

    root = tmp_path_factory.mktemp("tiny")
    backbone = build_tiny_backbone(root / "backbone")
    specs = [
        AdapterSpec(
            c, str(build_tiny_adapter(backbone, root / c, seed=i + 1)), description=DESCRIPTIONS[c]
        )
        for i, c in enumerate(CAPABILITIES)
    ]
    return PeftEngine(backbone, specs)


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_run_scores_every_item_and_is_deterministic(
    engine, small_suite: Suite, tmp_path: Path
) -> None:
    seen: list[str] = []
    settings = EpisodeSettings(**FAST, on_item=lambda r: seen.append(r.score.id))
    first = run_suite(
        engine,
        small_suite,
        results=tmp_path / "a.jsonl",
        library="tiny",
        backbone=WEIGHTS,
        limit=4,
        settings=settings,
    )
    ids = [q.id for q in small_suite.questions["test"][:4]]
    assert list(first) == ids
    assert sorted(seen) == sorted(ids)
    lines = _lines(tmp_path / "a.jsonl")
    assert lines[0]["run"] == {
        "suite_digest": small_suite.digest,
        "split": "test",
        "library": "tiny",
        "policy": "hard",
        "backbone": WEIGHTS,
        "episode": {
            "max_steps": 6,
            "max_new_tokens": 6,
            "runtime_switches": False,
            "max_phase_steps": None,
            "max_episode_tokens": None,
        },
    }
    assert sorted(line["id"] for line in lines[1:]) == sorted(ids)
    for result in first.values():
        assert 0.0 <= result.score.f1 <= 1.0
        assert result.decoded > 0
        assert result.finish_reason in {"answer", "max_steps"}
    again = run_suite(
        engine,
        small_suite,
        results=tmp_path / "b.jsonl",
        library="tiny",
        backbone=WEIGHTS,
        limit=4,
        settings=EpisodeSettings(**FAST),
    )
    assert {k: v.score for k, v in again.items()} == {k: v.score for k, v in first.items()}


def test_an_interrupted_run_continues_without_rescoring(
    engine, small_suite: Suite, tmp_path: Path
) -> None:
    results = tmp_path / "r.jsonl"
    questions = small_suite.questions["test"][:3]
    run_suite(
        engine,
        small_suite,
        results=results,
        library="tiny",
        backbone=WEIGHTS,
        limit=1,
        settings=EpisodeSettings(**FAST),
    )
    # tamper with the finished item: a resumed run must keep it, not score it again
    header, done = _lines(results)
    done["em"], done["answer"] = 0.5, "kept"
    results.write_text(json.dumps(header) + "\n" + json.dumps(done) + "\n")
    ran: list[str] = []
    out = run_suite(
        engine, small_suite, results=results, library="tiny", backbone=WEIGHTS, limit=3,
        settings=EpisodeSettings(**FAST, on_item=lambda r: ran.append(r.score.id)),
    )  # fmt: skip
    assert sorted(ran) == sorted(q.id for q in questions[1:])
    assert (out[questions[0].id].score.em, out[questions[0].id].score.answer) == (0.5, "kept")
    assert len(_lines(results)) == 4
    other_runs = [
        ({}, {"policy": "soft"}),
        ({"backbone": "1" * 64}, {}),  # other weights under the same library
        ({}, {"max_new_tokens": 7}),  # other caps make other episodes
    ]
    for run_args, caps in other_runs:
        with pytest.raises(ResultsMismatchError, match="another results file"):
            run_suite(
                engine, small_suite, results=results,
                **{"library": "tiny", "backbone": WEIGHTS, **run_args},
                settings=EpisodeSettings(**{**FAST, **caps}),
            )  # fmt: skip
    assert len(_lines(results)) == 4  # refused: nothing written
    more = EpisodeSettings(**{**FAST, "concurrency": 1})  # how many at once is the same run
    run_suite(engine, small_suite, results=results, library="tiny", backbone=WEIGHTS,
              limit=3, settings=more)  # fmt: skip
    assert len(_lines(results)) == 4


def test_item_results_round_trip() -> None:
    result = ItemResult(ItemScore("q", "name", "a", 1.0, 1.0, 0.5, 0.25), "answer", 12, 0.5)
    assert ItemResult.from_json(result.to_json()) == result


def test_runtime_switches_leave_no_bare_backbone_turn(engine, small_suite: Suite) -> None:
    """Hard policy with `runtime_switches`: the runtime loads each phase's adapter itself, so
    every generated token comes from an adapter, and the episode ends after the last phase."""
    import anyio

    from evals.runner import SuiteToolbox
    from runtime.agent import Agent, AgentConfig
    from runtime.episode import EpisodeManager
    from runtime.policy import make_policy
    from tasks.tools import serve_tools
    from tasks.trajectories import SYSTEM

    question = small_suite.questions["test"][0]
    order = list(question.phases)
    config = AgentConfig(max_steps=12, max_new_tokens=6, system=SYSTEM, runtime_switches=True)
    manager = EpisodeManager(engine, policy=make_policy("hard", order, list(engine.adapters)))
    episode = manager.create(task=question.question)

    async def main() -> None:
        async with SuiteToolbox([serve_tools(small_suite.index())]) as toolbox:
            await Agent(engine.tokenizer, toolbox, config).run(episode, question.question)

    anyio.run(main)
    manager.close_all()
    generated = [s for s in episode.steps if not s.forced]
    assert generated
    assert all(s.active is not None for s in generated)
    assert [s.active for s in episode.steps if s.forced] == order[: len(episode.control.loaded)]
    if episode.finish_reason == "answer":
        assert episode.control.loaded == order
