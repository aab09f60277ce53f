"""`weact runtime serve --engine vllm` end to end on vLLM's CPU build.

A real node process follows channel prod of a real `weact serve` (plan@1, write@1): it pulls
and verifies the library, loads it into vLLM, audits and heartbeats. Over HTTP an episode
runs to the end under the hard policy; over MCP the adapter tools are listed; a promotion of
write@2 reaches the node, whose heartbeat then reports write@2's manifest root.
The shared in-process engine is shut down first: one vLLM at a time on this machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from vllm_support import QUESTIONS, publish, wait_healthy

from registry.client import RegistryClient
from registry.launcher import embedded_registry, free_port

pytestmark = pytest.mark.vllm


@dataclass
class Node:
    url: str
    registry: RegistryClient  # as approver
    published: dict[str, Any]


@pytest.fixture(scope="module")
def node(
    no_inprocess_vllm: None,
    smollm2: Path,
    adapter_dir: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Node]:
    workdir = tmp_path_factory.mktemp("serve")
    with embedded_registry(workdir) as registry:
        published = publish(registry, adapter_dir, smollm2)
        port = free_port()
        argv = [
            sys.executable, "-c", "from cli.main import main; main()", "runtime", "serve",
            "--engine", "vllm", "--backbone", str(smollm2), "--registry", registry.url,
            "--channel", "prod", "--node-id", "vllm-node", "--library-dir",
            str(workdir / "library"), "--poll-wait", "2", "--port", str(port), "--no-kb",
            "--policy", "hard", "--order", "plan,write", "--max-steps", "3",
            "--max-new-tokens", "16",
        ]  # fmt: skip
        env = {**os.environ, "WEACT_TOKEN": published["node"]}
        log = workdir / "node.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        approver = RegistryClient(registry.url, published["approver"])
        try:
            url = f"http://127.0.0.1:{port}"
            wait_healthy(url, process, log, "/healthz")
            yield Node(url, approver, published)
        finally:
            approver.close()
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_an_http_episode_runs_on_the_vllm_engine(node: Node) -> None:
    assert httpx.get(f"{node.url}/healthz").json()["adapters"] == ["plan", "write"]
    created = httpx.post(f"{node.url}/v1/episodes", json={"task": QUESTIONS[1]}, timeout=30)
    assert created.status_code == 201, created.text
    episode_id = created.json()["id"]
    deadline = time.monotonic() + 300
    while (episode := httpx.get(f"{node.url}/v1/episodes/{episode_id}").json())["status"] in (
        "idle",
        "running",
    ):
        assert time.monotonic() < deadline
        time.sleep(1)
    assert episode["status"] == "done", episode["error"]
    assert "plan" in {s["active"] for s in episode["steps"]}  # the hard order starts with plan
    assert episode["totals"]["decoded"] > 0


def test_mcp_offers_the_adapter_tools(node: Node) -> None:
    from mcp import Client

    async def tools() -> list[str]:
        async with Client(f"{node.url}/mcp") as client:
            return [t.name for t in (await client.list_tools()).tools]

    assert {"load_lora", "offload_lora"} <= set(anyio.run(tools))


def test_the_node_follows_a_promotion(node: Node) -> None:
    write2 = node.published["adapters"]["write@2"]
    node.registry.promote("prod", {"write": write2["id"]})
    deadline = time.monotonic() + 120
    while True:
        nodes = {n["id"]: n for n in node.registry.list_nodes()}
        seen = nodes.get("vllm-node", {})
        if seen.get("revision") == 2:
            break
        assert time.monotonic() < deadline, seen
        time.sleep(1)
    assert seen["audit_ok"], seen["audit"]
    assert seen["audit"]["adapters"]["write"] == write2["manifest_root"]
    assert "cannot be read" in seen["audit"]["detail"]  # says what it did not check


def test_runtime_run_json_stdout_is_only_json(
    no_inprocess_vllm: None, smollm2: Path, adapter_dir: dict[str, Path]
) -> None:
    """`weact runtime run --engine vllm --json`: vLLM's logs (INFO, on stdout by vLLM's own
    logging config) go to stderr; stdout is the one JSON document."""
    argv = [
        sys.executable, "-c", "from cli.main import main; main()", "runtime", "run",
        "--engine", "vllm", "--backbone", str(smollm2), "--task", QUESTIONS[1], "--no-kb",
        "--adapter", f"plan={adapter_dir['plan@1']}",
        "--adapter", f"write={adapter_dir['write@1']}",
        "--policy", "hard", "--order", "plan,write", "--max-steps", "2",
        "--max-new-tokens", "8", "--json",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "VLLM_LOGGING_LEVEL"}  # INFO: chatty
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    episode = json.loads(done.stdout)  # the whole of stdout, nothing before it
    assert episode["task"] == QUESTIONS[1]
    assert "INFO" in done.stderr  # vLLM did log, to stderr
