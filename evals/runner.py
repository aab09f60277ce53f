"""Runs a suite's questions through the real agent loop on an engine, scores them, resumably.

Each question is one episode of `runtime.agent.Agent` on an `Engine` session, with the
suite's MCP tools (search, fetch_document, calculate) and the policy of the run: `hard`
follows the question's own phases (restricted to the library's adapters), `soft` lets the
model choose. Episodes run concurrently (anyio tasks, `concurrency` at once); the reference
engine interleaves sessions under its lock, a batching engine overlaps them.

Every finished item is appended to a JSONL results file at once (one line, flushed), after a
header naming the run (suite digest, split, library key, policy, the backbone's manifest root
and the caps that shape an episode). Started again on the same file, the run skips the items
already there: an interrupted evaluation continues where it stopped and never re-scores what
it finished. A file of another run is refused: other weights or other caps are another run.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evals.errors import EvalError
from evals.scoring import ItemScore, score_episode
from evals.suite import Suite
from runtime.engine import Engine
from runtime.mcp_client import McpToolbox
from tasks.questions import Question
from tasks.tools import TOOL_SCHEMAS, serve_tools
from tasks.trajectories import SYSTEM


class ResultsMismatchError(EvalError, ValueError):
    """A results file that belongs to another run (suite, split, library, policy, backbone or
    episode caps)."""


@dataclass(frozen=True)
class RunKey:
    """What a results file is about; a resumed run must match it exactly."""

    suite_digest: str
    split: str
    library: str  # a library digest, or another stable name of the adapters evaluated
    policy: str
    backbone: str  # the backbone's manifest root (`storage.manifest.manifest_of_path`)
    episode: dict[str, Any]  # the caps that shape an episode (`EpisodeSettings.shape`)

    def to_json(self) -> dict[str, Any]:
        return {
            "suite_digest": self.suite_digest,
            "split": self.split,
            "library": self.library,
            "policy": self.policy,
            "backbone": self.backbone,
            "episode": dict(self.episode),
        }


@dataclass(frozen=True)
class ItemResult:
    score: ItemScore
    finish_reason: str | None
    decoded: int  # tokens generated in the episode
    elapsed_s: float
    loads: tuple[str, ...] = ()  # the capabilities loaded, in order (repeats kept)
    # where the episode's time went, as the runtime recorded it (`runtime.episode.totals`):
    # adapter control (load/offload) and KV rebuild after a switch; None in older files
    switch_s: float | None = None
    rebuild_s: float | None = None
    prefilled: int | None = None  # prompt tokens the engine processed (not served from cache)

    def to_json(self) -> dict[str, Any]:
        out = {
            **self.score.to_json(),
            "finish_reason": self.finish_reason,
            "decoded": self.decoded,
            "elapsed_s": round(self.elapsed_s, 3),
            "loads": list(self.loads),
        }
        if self.switch_s is not None and self.rebuild_s is not None:
            out["switch_s"], out["rebuild_s"] = round(self.switch_s, 6), round(self.rebuild_s, 6)
        if self.prefilled is not None:
            out["prefilled"] = self.prefilled
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ItemResult:
        fields = {k: obj[k] for k in ("id", "kind", "answer", "em", "f1", "doc_recall")}
        score = ItemScore(**fields, plan_coverage=obj["plan_coverage"])
        loads = tuple(str(c) for c in obj.get("loads", ()))
        timed = "switch_s" in obj and "rebuild_s" in obj
        return cls(
            score, obj.get("finish_reason"), int(obj["decoded"]), float(obj["elapsed_s"]), loads,
            float(obj["switch_s"]) if timed else None, float(obj["rebuild_s"]) if timed else None,
            int(obj["prefilled"]) if "prefilled" in obj else None,
        )  # fmt: skip


class ResultsLog:
    """Append-only JSONL of a run: a header line, then one line per finished item."""

    def __init__(self, path: str | os.PathLike[str], key: RunKey) -> None:
        self.path = Path(path)
        self.key = key
        self.done: dict[str, ItemResult] = {}
        self._lock = threading.Lock()
        if self.path.exists() and self.path.stat().st_size:
            self._load()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._write({"run": key.to_json()})

    def _load(self) -> None:
        lines = self.path.read_text(encoding="utf-8").splitlines()
        header = _run_in(lines[0])
        try:
            records = [json.loads(line) for line in lines[1:] if line.strip()]
        except json.JSONDecodeError as exc:
            raise ResultsMismatchError(f"{self.path}: not a results file ({exc})") from None
        if header is None:
            raise ResultsMismatchError(f"{self.path}: not a results file (no header line)")
        if header != self.key.to_json():
            raise ResultsMismatchError(
                f"{self.path} holds the run {header}, not {self.key.to_json()}: "
                "use another results file"
            )
        for record in records:
            result = ItemResult.from_json(record)
            self.done[result.score.id] = result

    @staticmethod
    def holds(path: str | os.PathLike[str], key: RunKey) -> bool:
        """Whether `path` is absent, empty or a results file of the run `key` (resumable)."""
        path = Path(path)
        if not path.exists() or not path.stat().st_size:
            return True
        with open(path, encoding="utf-8") as fh:
            return bool(_run_in(fh.readline()) == key.to_json())

    def _write(self, obj: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(obj, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def append(self, result: ItemResult) -> None:
        with self._lock:
            self._write(result.to_json())
            self.done[result.score.id] = result


def _run_in(line: str) -> Any:
    """The run a results file's header line names; None when the line is no header."""
    try:
        return json.loads(line).get("run")
    except (json.JSONDecodeError, AttributeError):
        return None


class SuiteToolbox(McpToolbox):
    """The suite's MCP tools, shown to the model exactly as the gold trajectories show them."""

    def schemas(self) -> list[dict[str, Any]]:
        served = {s["function"]["name"] for s in super().schemas()}
        shown = [dict(t) for t in TOOL_SCHEMAS]
        if served != {t["function"]["name"] for t in shown}:
            raise EvalError(f"the tool server offers {sorted(served)}, not the suite's tools")
        return shown


@dataclass
class EpisodeSettings:
    # "hard": the question's phases; "soft": the model chooses; "choice": the model chooses
    # under the constrained soft policy (only valid moves, decoded under a mask)
    policy: str = "hard"
    max_steps: int = 12
    max_new_tokens: int = 96
    concurrency: int = 4
    runtime_switches: bool = False  # hard policy: the runtime switches between phases
    max_phase_steps: int | None = None  # with runtime_switches: generations per phase
    max_episode_tokens: int | None = None  # generated tokens per episode (None: no limit)
    on_item: Callable[[ItemResult], None] | None = field(default=None, repr=False)

    def shape(self) -> dict[str, Any]:
        """The caps that change what an episode is (not how many run at once)."""
        return {
            "max_steps": self.max_steps,
            "max_new_tokens": self.max_new_tokens,
            "runtime_switches": self.runtime_switches,
            "max_phase_steps": self.max_phase_steps,
            "max_episode_tokens": self.max_episode_tokens,
        }


def _policy(kind: str, question: Question, library: Sequence[str]) -> Any:
    from runtime.policy import make_policy

    if kind in ("soft", "choice"):
        return make_policy("soft", library=library, constrained=kind == "choice")
    order = [p for p in question.phases if p in library]
    return make_policy("hard", order, library)


async def _episode(
    engine: Engine, toolbox: McpToolbox, question: Question, settings: EpisodeSettings
) -> ItemResult:
    from runtime.agent import Agent, AgentConfig
    from runtime.episode import EpisodeManager, totals

    config = AgentConfig(
        max_steps=settings.max_steps,
        max_new_tokens=settings.max_new_tokens,
        system=SYSTEM,
        runtime_switches=settings.runtime_switches,
        max_phase_steps=settings.max_phase_steps,
        max_episode_tokens=settings.max_episode_tokens,
    )
    policy = _policy(settings.policy, question, list(engine.adapters))
    manager = EpisodeManager(engine, policy=policy, max_episodes=1)
    episode = manager.create(task=question.question)
    try:
        await Agent(engine.tokenizer, toolbox, config).run(episode, question.question)
        score = score_episode(question, episode.messages)
        loads = tuple(episode.control.loaded)
        spent = totals(episode)
        return ItemResult(
            score, episode.finish_reason, episode.decoded, episode.elapsed_s, loads,
            spent["switch_s"], spent["rebuild_s"], int(spent["prefilled"]),
        )  # fmt: skip
    finally:
        manager.close_all()


async def run_questions(
    engine: Engine,
    suite: Suite,
    questions: Sequence[Question],
    log: ResultsLog,
    settings: EpisodeSettings,
) -> dict[str, ItemResult]:
    """Every question not yet in `log`, `settings.concurrency` episodes at a time."""
    import anyio

    todo = [q for q in questions if q.id not in log.done]
    limiter = anyio.CapacityLimiter(max(1, settings.concurrency))

    async with SuiteToolbox([serve_tools(suite.index())]) as toolbox:

        async def one(question: Question) -> None:
            async with limiter:
                result = await _episode(engine, toolbox, question, settings)
            log.append(result)
            if settings.on_item is not None:
                settings.on_item(result)

        async with anyio.create_task_group() as tg:
            for question in todo:
                tg.start_soon(one, question)
    return {q.id: log.done[q.id] for q in questions}


def run_suite(
    engine: Engine,
    suite: Suite,
    *,
    results: str | os.PathLike[str],
    library: str,
    backbone: str,
    split: str = "test",
    limit: int | None = None,
    settings: EpisodeSettings | None = None,
) -> dict[str, ItemResult]:
    """Run (or resume) `split` of the suite on `engine`, whose backbone's manifest root is
    `backbone`; the per-item results, in order."""
    import anyio

    settings = settings or EpisodeSettings()
    questions = list(suite.questions[split])[:limit]
    key = RunKey(suite.digest, split, library, settings.policy, backbone, settings.shape())
    log = ResultsLog(results, key)
    return anyio.run(run_questions, engine, suite, questions, log, settings)
