"""The runtime API over the real PeftEngine on the tiny model, unscripted.

The random model never calls a tool, so under the hard policy the runtime loads every phase
itself: real switches, real generation under each adapter, and a real KV-cache rebuild after
each switch, all visible in the trajectory, the event stream and the metrics.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from support.serving import serve

from runtime.agent import AgentConfig
from runtime.engine import AdapterSpec
from runtime.server import create_app


@pytest.fixture(scope="module")
def base(tiny_backbone: Path, tiny_adapters: dict[str, Path]):
    from runtime.engines.peft import PeftEngine

    engine = PeftEngine(tiny_backbone, [AdapterSpec(n, str(p)) for n, p in tiny_adapters.items()])
    with serve(create_app(engine, agent_config=AgentConfig(max_new_tokens=16))) as url:
        yield url


def metric(text: str, name: str) -> float:
    line = next(line for line in text.splitlines() if line.startswith(name + " "))
    return float(line.split()[-1])


def test_hard_episode_on_the_tiny_model_over_http(base) -> None:
    with httpx.Client(base_url=base, timeout=60) as client:
        created = client.post("/v1/episodes", json={"task": "Capital of France?", "max_steps": 4})
        assert created.status_code == 201
        episode_id = created.json()["id"]
        kinds = []
        with client.stream("GET", f"/v1/episodes/{episode_id}/events") as stream:
            for line in stream.iter_lines():
                if line.startswith("data: "):
                    kinds.append(json.loads(line[6:])["type"])
        trajectory = client.get(f"/v1/episodes/{episode_id}").json()
        metrics = client.get("/metrics").text
    assert trajectory["status"] == "done", trajectory["error"]
    assert kinds[-1] == "done"
    assert "token" in kinds
    generated = [s for s in trajectory["steps"] if not s["forced"]]
    assert [s["active"] for s in generated] == [None, "plan", "search", "write"]
    assert trajectory["loaded"] == ["plan", "search", "write"]
    # After each switch the new configuration re-processes the history it had not seen.
    for step in generated[1:]:
        assert step["rebuild_s"] > 0
        assert step["prefilled"] > step["decoded"]
    assert trajectory["totals"]["rebuild_s"] > 0
    assert 0 < trajectory["totals"]["rebuild_share"] < 1
    assert metric(metrics, "weact_runtime_switch_seconds_count") == 5
    assert metric(metrics, "weact_runtime_rebuild_seconds_count") >= 3
    assert metric(metrics, 'weact_runtime_episodes_total{status="done"}') == 1


def _run_episode(client: httpx.Client, body: dict) -> tuple[dict, list[dict]]:
    created = client.post("/v1/episodes", json=body)
    assert created.status_code == 201, created.text
    episode_id = created.json()["id"]
    events = []
    with client.stream("GET", f"/v1/episodes/{episode_id}/events") as stream:
        for line in stream.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    return client.get(f"/v1/episodes/{episode_id}").json(), events


def test_the_episode_body_asks_for_the_constrained_soft_choice(base) -> None:
    task = "What is the capital of France?"
    with httpx.Client(base_url=base, timeout=60) as client:
        chosen, events = _run_episode(
            client, {"task": task, "policy": "soft", "constrained": True, "max_steps": 6}
        )
        free, _ = _run_episode(client, {"task": task, "policy": "soft", "max_steps": 6})
    assert chosen["status"] == "done", chosen["error"]
    assert chosen["policy"] == {"kind": "soft", "guesses": {}, "constrained": True}
    # the random backbone, free, never writes a load_lora call; constrained, it chooses among
    # the valid moves (which one: tests/runtime/test_soft_choice.py)
    assert free["status"] == "done", free["error"]
    assert free["policy"] == {"kind": "soft", "guesses": {}}
    assert free["loaded"] == []
    assert set(chosen["loaded"]) <= {"plan", "search", "write"}
    choices = [e for e in events if e["type"] == "choice"]
    assert choices
    first = choices[0]["move"]
    assert first in {"plan", "search", "write", "answer"}
    assert chosen["loaded"][:1] == ([] if first == "answer" else [first])


def test_a_constrained_hard_episode_is_refused_and_nothing_starts(base) -> None:
    with httpx.Client(base_url=base, timeout=60) as client:
        before = client.get("/v1/episodes").json()
        for body in ({"policy": "hard", "constrained": True}, {"constrained": True}):
            refused = client.post("/v1/episodes", json={"task": "Capital?", **body})
            assert refused.status_code == 422, refused.text
            assert "soft policy only" in refused.text
        assert client.get("/v1/episodes").json() == before
