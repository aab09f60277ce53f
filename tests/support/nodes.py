"""Runtime nodes under test: real `weact runtime serve` processes following a channel.

`runtime_node(...)` starts one (the `weact` console script of this interpreter, soft policy,
no knowledge-base tool), waits until its `/healthz` answers and stops it when the block
exits. `RuntimeNode` reads its health and drives MCP episodes with the official client in
its default (stateless, 2026-07-28) mode, passing episode handles as tool arguments.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx

from registry.launcher import child_process, free_port, wait_until_healthy, weact_command

_ENV_DROPPED = ("WEACT_TOKEN", "WEACT_RUNTIME_TOKEN", "WEACT_URL")


@dataclass(frozen=True)
class RuntimeNode:
    url: str
    node_id: str
    token: str  # a client token of this node (MCP and HTTP)
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def health(self) -> dict[str, Any]:
        return dict(httpx.get(f"{self.url}/healthz", headers=self.headers, timeout=10).json())

    def episode(self, episode_id: str) -> dict[str, Any]:
        response = httpx.get(f"{self.url}/v1/episodes/{episode_id}", headers=self.headers)
        return dict(response.json())

    def calls(self, *steps: tuple[str, dict[str, Any]]) -> list[tuple[bool, Any]]:
        """Run MCP tool calls in order on one stateless connection: (is_error, result)."""
        return anyio.run(self._calls, steps)

    async def _calls(self, steps: tuple[tuple[str, dict[str, Any]], ...]) -> list[Any]:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        http = httpx2.AsyncClient(headers=self.headers, timeout=30)
        out: list[tuple[bool, Any]] = []
        async with http, Client(streamable_http_client(f"{self.url}/mcp", http_client=http)) as c:
            for name, arguments in steps:
                result = await c.call_tool(name, arguments)
                if result.is_error:
                    out.append((True, result.content[0].text))
                else:
                    out.append((False, result.structured_content))
        return out

    def open_episode(self) -> dict[str, Any]:
        ((error, opened),) = self.calls(("open_episode", {}))
        assert not error, opened
        return dict(opened)


@contextlib.contextmanager
def runtime_node(
    workdir: Path,
    *,
    backbone: Path,
    registry_url: str,
    registry_token: str,
    channel: str,
    node_id: str,
    token: str,
    heartbeat_s: float = 0.5,
    timeout: float = 120.0,
) -> Iterator[RuntimeNode]:
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = weact_command() + [
        "runtime", "serve", "--backbone", str(backbone), "--policy", "soft", "--no-kb",
        "--registry", registry_url, "--registry-token", registry_token, "--channel", channel,
        "--node-id", node_id, "--library-dir", str(workdir / "library"), "--client-token", token,
        "--port", str(port), "--heartbeat", str(heartbeat_s), "--poll-wait", "30",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in _ENV_DROPPED}
    url = f"http://127.0.0.1:{port}"
    log = workdir / "node.log"
    with child_process(argv, log, cwd=workdir, env=env, stop_timeout=20) as process:
        node = RuntimeNode(url, node_id, token, process, log)
        health = f"{url}/healthz"
        wait_until_healthy(health, process, log, timeout, what="runtime node", headers=node.headers)
        yield node
