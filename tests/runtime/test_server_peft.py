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
