"""`weact runtime run`'s episode, in-process, and its trajectory as a table for people."""

from __future__ import annotations

from typing import Any

from runtime.engine import Engine


def run_episode(engine: Engine, policy: Any, config: Any, targets: list[Any], task: str) -> Any:
    import anyio

    from runtime.agent import Agent
    from runtime.episode import EpisodeManager
    from runtime.mcp_client import McpToolbox

    episode = EpisodeManager(engine, policy=policy).create(task=task)

    async def main() -> None:
        async with McpToolbox(targets) as toolbox:
            await Agent(engine.tokenizer, toolbox, config).run(episode, task)

    anyio.run(main)
    return episode


def print_trajectory(episode: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"episode {episode.id} ({episode.policy.kind})")
    for column in ("step", "active", "prefilled", "hit", "decoded", "rebuild ms", "switch ms"):
        table.add_column(column, justify="right")
    table.add_column("tool calls")
    for s in episode.steps:
        table.add_row(
            str(s.step),
            str(s.active or "-"),
            str(s.prefilled),
            str(s.cache_hit),
            str(s.decoded),
            f"{s.rebuild_s * 1e3:.1f}",
            f"{s.switch_s * 1e3:.2f}",
            ", ".join(s.tool_calls) + (" (runtime)" if s.forced else ""),
        )
    console = Console()
    console.print(table)
    t = episode.to_json()["totals"]
    console.print(
        f"finish: {episode.finish_reason}  elapsed: {episode.elapsed_s:.2f}s  "
        f"switch share: {t['switch_share']:.1%}  rebuild share: {t['rebuild_share']:.1%}"
    )
    console.print(f"answer: {episode.answer!r}")
