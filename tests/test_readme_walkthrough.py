"""The README's path from nothing to a served library, run as written on the tiny model.

The ```` ```bash walkthrough ```` block of README.md runs in one bash (`set -euo pipefail`)
in an empty directory, with only `BACKBONE` (the tiny test backbone instead of SmolLM2),
the two ports and `TRAIN_ARGS` (a short training) set from outside. At the end a node
serves channel `prod` revision 1 with plan, search and write, its audit passing, as the
registry and the node's own /healthz say. The block's background processes (the registry
and the node) run in a process group of their own, ended when the test ends.
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

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"```bash walkthrough\n(.*?)```", re.DOTALL)
TRAIN_ARGS = "--rank 2 --alpha 4 --epochs 1 --lr 0.01 --seed 1"


def walkthrough() -> str:
    blocks = BLOCK.findall(README.read_text())
    assert len(blocks) == 1, "README.md must hold one ```bash walkthrough block"
    return str(blocks[0])


@pytest.mark.slow
def test_the_readme_walkthrough_runs_as_written(tmp_path_factory: pytest.TempPathFactory) -> None:
    from runtime.tiny import build_tiny_backbone

    tiny_backbone = build_tiny_backbone(tmp_path_factory.mktemp("backbone"))
    tmp_path = tmp_path_factory.mktemp("walkthrough")
    port, node_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEACT_")}
    env |= {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "BACKBONE": str(tiny_backbone),
        "PORT": str(port),
        "NODE_PORT": str(node_port),
        "TRAIN_ARGS": TRAIN_ARGS,
    }
    script = "set -euo pipefail\n" + walkthrough()
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

        health = httpx.get(f"http://127.0.0.1:{node_port}/healthz", timeout=10).json()
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
        assert sorted(health["adapters"]) == ["plan", "search", "write"]
        for capability in ("plan", "search", "write"):
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
