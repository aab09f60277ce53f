"""Many episodes at once on one VllmEngine, through the real agent loop.

`runtime.concurrent.run_episodes` drives eight episodes (hard policy plan -> write, so each
episode switches adapters) with up to eight in flight: vLLM batches their requests, each with
its own active LoRA. Greedy decoding makes every episode independent of what runs beside
it, so the concurrent run must reproduce the sequential one message for message.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from vllm_support import QUESTIONS

from runtime.agent import AgentConfig
from runtime.concurrent import run_episodes
from runtime.policy import make_policy

pytestmark = pytest.mark.vllm

TASKS = QUESTIONS[:8]


def transcript(episode: Any) -> tuple[Any, ...]:
    return (episode.status, tuple(s.active for s in episode.steps), repr(episode.messages))


def test_eight_episodes_at_once_match_eight_in_a_row(vllm_engine: Any, capsys: Any) -> None:
    policy = make_policy("hard", ["plan", "write"], vllm_engine.adapters, None)
    options = {"policy": policy, "config": AgentConfig(max_steps=4, max_new_tokens=24)}
    driver = vllm_engine.driver
    done: list[int] = []

    start = time.perf_counter()
    serial = run_episodes(vllm_engine, TASKS, concurrency=1, **options)
    serial_s = time.perf_counter() - start
    assert driver.in_flight == 0

    driver.max_in_flight = 0
    start = time.perf_counter()
    together = run_episodes(
        vllm_engine, TASKS, concurrency=8, on_done=lambda i, e: done.append(i), **options
    )
    together_s = time.perf_counter() - start

    assert sorted(done) == list(range(len(TASKS)))
    assert driver.max_in_flight >= 4  # vLLM had several episodes' requests to batch
    assert all(e.status == "done" for e in together), [e.error for e in together]
    assert [e.task for e in together] == TASKS
    assert {s.active for e in together for s in e.steps} >= {"plan", "write"}
    assert [transcript(e) for e in together] == [transcript(e) for e in serial]
    assert not vllm_engine.release_unused()  # every session was closed, nothing pinned
    with capsys.disabled():
        print(  # noqa: T201 - the figures are the point of this test
            f"\n8 episodes on VllmEngine: sequential {serial_s:.1f} s, concurrent "
            f"{together_s:.1f} s ({serial_s / together_s:.2f}x), "
            f"max {driver.max_in_flight} requests in flight"
        )
