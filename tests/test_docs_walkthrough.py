"""The docs' paths from nothing to a served library, run as written on the tiny model.

Two blocks: the ```` ```bash walkthrough ```` of docs/walkthrough.md (plan, search and write)
and the README's ```` ```bash tour ```` (write alone). Each runs in one bash
(`set -euo pipefail`) in an empty directory, with only `BACKBONE` (the tiny test backbone
instead of SmolLM2), the two ports and `TRAIN_ARGS` (a short training, where the block uses
it) set from outside. At the end a node serves channel `prod` revision 1 with the block's
capabilities, its audit passing, as the registry and the node's own /healthz say. The
block's background processes (the registry and the node) run in a process group of their
own, ended when the test ends.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from registry.launcher import free_port

pytest.importorskip("peft")

ROOT = Path(__file__).resolve().parents[1]
TRAIN_ARGS = "--rank 2 --alpha 4 --epochs 1 --lr 0.01 --seed 1"
CLIENT_TOKEN = "walkthrough-client-token"
BLOCKS = [
    pytest.param(
        "docs/walkthrough.md", "walkthrough", ["plan", "search", "write"], id="walkthrough"
    ),
    pytest.param("README.md", "tour", ["write"], id="readme-tour"),
]


def block(path: str, name: str) -> str:
    blocks = re.findall(rf"```bash {name}\n(.*?)```", (ROOT / path).read_text(), re.DOTALL)
    assert len(blocks) == 1, f"{path} must hold one ```bash {name} block"
    return str(blocks[0])


@pytest.mark.slow
@pytest.mark.timeout(900)  # as long as the block may run (communicate below), not the suite's 300 s
@pytest.mark.parametrize(("path", "name", "capabilities"), BLOCKS)
def test_the_block_runs_as_written(
    path: str, name: str, capabilities: list[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    from runtime.tiny import build_tiny_backbone

    tiny_backbone = build_tiny_backbone(tmp_path_factory.mktemp("backbone"))
    tmp_path = tmp_path_factory.mktemp(name)
    port, node_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEACT_")}
    env |= {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "BACKBONE": str(tiny_backbone),
        "PORT": str(port),
        "NODE_PORT": str(node_port),
        "TRAIN_ARGS": TRAIN_ARGS,
        "CLIENT": CLIENT_TOKEN,
    }
    script = "set -euo pipefail\n" + block(path, name)
    process = subprocess.Popen(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the background jobs end with it
    )
    try:
        output, _ = process.communicate(timeout=900)
        logs = {name: (tmp_path / name) for name in ("serve.log", "node.log")}
        shown = "\n".join(
            f"--- {n}\n{p.read_text()[-3000:]}" for n, p in logs.items() if p.exists()
        )
        assert process.returncode == 0, f"{output[-6000:]}\n{shown}"
        assert "node-1" in output  # `weact nodes` at the end

        node_url = f"http://127.0.0.1:{node_port}"
        if name == "walkthrough":  # the node runs with a client token: nothing without it
            assert httpx.get(f"{node_url}/healthz", timeout=10).status_code == 401
        bearer = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
        health = httpx.get(f"{node_url}/healthz", headers=bearer, timeout=10).json()
        url = f"http://127.0.0.1:{port}"
        done = subprocess.run(
            [str(Path(sys.executable).with_name("weact")), "nodes", "--json"],
            env={**env, "WEACT_URL": url, "WEACT_TOKEN": admin_token(tmp_path)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        (node,) = json.loads(done.stdout)
        assert (node["id"], node["channel"], node["revision"], node["audit_ok"]) == (
            "node-1",
            "prod",
            1,
            True,
        )
        assert sorted(health["adapters"]) == capabilities
        for capability in capabilities:
            assert (tmp_path / capability / "adapter_model.safetensors").is_file()
            assert (tmp_path / capability / "training.json").is_file()
    finally:
        try:
            os.killpg(process.pid, signal.SIGTERM)  # the group this test started
        except ProcessLookupError:
            pass
        process.wait(timeout=30)


def admin_token(workdir: Path) -> str:
    """A fresh admin token for the checks, in the walkthrough's database."""
    done = subprocess.run(
        [str(Path(sys.executable).with_name("weact")), "token", "create", "--name", "check",
         "--role", "admin", "--database-url", f"sqlite:///{workdir / '.weact' / 'registry.db'}"],
        capture_output=True, text=True, timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("WEACT_")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
