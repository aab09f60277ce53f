"""Many episodes at once on one engine: the call an evaluation runner makes.

    from runtime.concurrent import run_episodes
    episodes = run_episodes(engine, tasks, policy=policy, config=AgentConfig(max_steps=8),
                            tool_servers=[serve_search_tool()], concurrency=8,
                            on_done=lambda i, episode: progress.advance())

Each task gets its own `Episode` (its own engine session: active adapter, token history,
the library it pinned at its start) driven by the real agent loop. Up to `concurrency`
episodes run at once in one event loop; each generate runs in a worker thread, so on
`VllmEngine` the episodes' requests are in flight together and vLLM decodes them in shared
batches, each with its own active LoRA; on `PeftEngine` they interleave token by token.
Greedy decoding keeps every episode deterministic whatever runs beside it.

Episodes come back in task order; a failed episode records its error and does not stop the
others. Each episode's session is closed when it ends (so a swapped-out adapter version can
be released), and `on_done(index, episode)` is called as each one ends (progress bars,
resumable runs that persist results as they come).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio

from runtime.agent import Agent, AgentConfig
from runtime.engine import Engine
from runtime.episode import Episode, EpisodeManager
from runtime.mcp_client import McpToolbox
from runtime.policy import Policy

OnDone = Callable[[int, Episode], None]


async def arun_episodes(
    engine: Engine,
    tasks: Sequence[str],
    *,
    policy: Policy | None = None,
    config: AgentConfig | None = None,
    tool_servers: Sequence[Any] = (),
    concurrency: int = 8,
    on_done: OnDone | None = None,
) -> list[Episode]:
    """Run `tasks` on `engine`, at most `concurrency` at a time, in this event loop."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    manager = EpisodeManager(engine, policy=policy, max_episodes=max(1, len(tasks)))
    episodes: list[Episode | None] = [None] * len(tasks)
    limiter = anyio.CapacityLimiter(concurrency)
    threads = anyio.to_thread.current_default_thread_limiter()
    threads.total_tokens = max(threads.total_tokens, concurrency + 4)  # generate + prefetch

    async with McpToolbox(tool_servers) as toolbox:
        agent = Agent(engine.tokenizer, toolbox, config)

        async def one(index: int) -> None:
            async with limiter:
                episode = manager.create(task=tasks[index])
                try:
                    await agent.run(episode, tasks[index])
                finally:
                    manager.close(episode.id)
                episodes[index] = episode
                if on_done is not None:
                    on_done(index, episode)

        async with anyio.create_task_group() as group:
            for index in range(len(tasks)):
                group.start_soon(one, index)
    return [e for e in episodes if e is not None]


def run_episodes(engine: Engine, tasks: Sequence[str], **options: Any) -> list[Episode]:
    """`arun_episodes` from synchronous code (starts and ends its own event loop)."""

    async def main() -> list[Episode]:
        return await arun_episodes(engine, tasks, **options)

    return anyio.run(main)
