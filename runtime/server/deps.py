"""What the routes need: the node's `Runtime` (episodes, how to run one, metrics) and the
dependencies that hand it and an episode to a route."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Annotated, Any

import anyio
from fastapi import Depends, Request

from runtime.agent import Agent, AgentConfig
from runtime.episode import Episode, EpisodeManager
from runtime.mcp_client import McpToolbox
from runtime.policy import HardPolicy, Policy, make_policy, parse_guesses
from runtime.server.metrics import Metrics
from runtime.server.schemas import EpisodeCreate


@dataclass
class Runtime:
    """The episodes, how to run one, and the metrics; the app's lifespan sets the toolbox
    and the task group episodes run in."""

    episodes: EpisodeManager
    agent_config: AgentConfig
    metrics: Metrics
    toolbox: McpToolbox | None = None
    task_group: Any = None

    def start(self, body: EpisodeCreate) -> Episode:
        policy = episode_policy(self.episodes.policy, body, self.episodes.engine.adapters)
        episode = self.episodes.create(policy=policy, task=body.task)
        config = self.agent_config
        if body.max_steps is not None:
            config = replace(config, max_steps=body.max_steps)
        agent = Agent(self.episodes.engine.tokenizer, self.toolbox, config)
        episode.status = "running"  # before the task starts: an SSE reader must wait for it
        self.task_group.start_soon(self._run, agent, episode, body.task)
        return episode

    async def _run(self, agent: Agent, episode: Episode, task: str) -> None:
        await agent.run(episode, task)
        self.metrics.on_episode(episode)
        await anyio.to_thread.run_sync(self.episodes.finished, episode)


def episode_policy(default: Policy, body: EpisodeCreate, library: Collection[str]) -> Policy:
    """The node's policy, or the one the request asks for (keeping the node's hard order)."""
    if body.policy is None and body.order is None and body.guesses is None:
        return default
    kind = body.policy or default.kind
    order = body.order
    if order is None and kind == "hard" and isinstance(default, HardPolicy):
        order = list(default.order)
    guesses = parse_guesses(body.guesses) if body.guesses is not None else None
    return make_policy(kind, order, library, guesses)


def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime  # type: ignore[no-any-return]


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def get_episode(episode_id: str, rt: RuntimeDep) -> Episode:
    return rt.episodes.get(episode_id)


EpisodeDep = Annotated[Episode, Depends(get_episode)]
