"""What the routes need: the node's `Runtime` (episodes, how to run and cancel one, metrics)
and the dependencies that hand it and an episode (one the caller may see) to a route."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

import anyio
from fastapi import Depends, Request

from runtime.agent import Agent, AgentConfig
from runtime.episode import Episode, EpisodeManager
from runtime.mcp_client import McpToolbox
from runtime.policy import HardPolicy, Policy, SoftPolicy, make_policy, parse_guesses
from runtime.server.auth import ScopeDep
from runtime.server.metrics import Metrics
from runtime.server.schemas import EpisodeCreate

CANCEL_WAIT_S = 30.0  # a cancel waits this long for the episode's step in flight to end
CANCELLED_BY_CLIENT = "cancelled by its client"


@dataclass
class _Run:
    scope: anyio.CancelScope
    done: anyio.Event


@dataclass
class Runtime:
    """The episodes, how to run one, and the metrics; the app's lifespan sets the toolbox
    and the task group episodes run in."""

    episodes: EpisodeManager
    agent_config: AgentConfig
    metrics: Metrics
    toolbox: McpToolbox | None = None
    task_group: Any = None
    _runs: dict[str, _Run] = field(default_factory=dict)

    def start(self, body: EpisodeCreate, owner: str = "") -> Episode:
        """Start an episode for `owner` (the credentials that may see it) in the background."""
        policy = episode_policy(self.episodes.policy, body, self.episodes.engine.adapters)
        episode = self.episodes.create(policy=policy, task=body.task, owner=owner)
        config = self.agent_config
        if body.max_steps is not None:
            config = replace(config, max_steps=body.max_steps)
        agent = Agent(self.episodes.engine.tokenizer, self.toolbox, config)
        episode.status = "running"  # before the task starts: an SSE reader must wait for it
        run = self._runs[episode.id] = _Run(anyio.CancelScope(), anyio.Event())
        self.task_group.start_soon(self._run, agent, episode, body.task, run)
        return episode

    async def cancel(self, episode: Episode) -> None:
        """Stop the episode's run (if it runs) and wait, up to CANCEL_WAIT_S, for it to end:
        the step in flight finishes, then the episode is "cancelled"."""
        run = self._runs.get(episode.id)
        if run is None:
            return  # not started here or already over: nothing to stop
        episode.cancel_reason = CANCELLED_BY_CLIENT
        run.scope.cancel()
        with anyio.move_on_after(CANCEL_WAIT_S):
            await run.done.wait()

    async def _run(self, agent: Agent, episode: Episode, task: str, run: _Run) -> None:
        try:
            with run.scope:
                await agent.run(episode, task)
            self.metrics.on_episode(episode)
            await anyio.to_thread.run_sync(self.episodes.finished, episode)
        finally:
            self._runs.pop(episode.id, None)
            run.done.set()


def episode_policy(default: Policy, body: EpisodeCreate, library: Collection[str]) -> Policy:
    """The node's policy, or the one the request asks for (keeping the node's hard order, and
    its constrained choice when the request asks for the soft policy without saying)."""
    asked = (body.policy, body.order, body.guesses, body.constrained)
    if all(a is None for a in asked):
        return default
    kind = body.policy or default.kind
    order = body.order
    if order is None and kind == "hard" and isinstance(default, HardPolicy):
        order = list(default.order)
    guesses = parse_guesses(body.guesses) if body.guesses is not None else None
    constrained = body.constrained
    if constrained is None:
        constrained = kind == "soft" and isinstance(default, SoftPolicy) and default.constrained
    return make_policy(kind, order, library, guesses, constrained)


def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime  # type: ignore[no-any-return]


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def get_episode(episode_id: str, rt: RuntimeDep, scope: ScopeDep) -> Episode:
    """The episode, if the caller may see it; 404 (`EpisodeNotFoundError`) otherwise."""
    return rt.episodes.get(episode_id, owner=scope)


EpisodeDep = Annotated[Episode, Depends(get_episode)]
