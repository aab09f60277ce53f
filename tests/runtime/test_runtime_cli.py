"""`weact runtime` on the tiny model: run an episode, serve with a token, bad input."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from cli.main import app


def adapter_args(adapters: dict[str, Path]) -> list[str]:
    return [arg for name, path in adapters.items() for arg in ("--adapter", f"{name}={path}")]


def invoke(*args: str):
    return CliRunner().invoke(app, ["runtime", *args], catch_exceptions=False)


def test_run_prints_the_trajectory_as_json(tiny_backbone, tiny_adapters) -> None:
    result = invoke(
        "run",
        "--task",
        "Capital of France?",
        "--backbone",
        str(tiny_backbone),
        *adapter_args(tiny_adapters),
        "--policy",
        "hard",
        "--max-steps",
        "2",
        "--max-new-tokens",
        "4",
        "--json",
    )
    assert result.exit_code == 0, result.output
    trajectory = json.loads(result.stdout)
    assert trajectory["status"] == "done"
    assert trajectory["task"] == "Capital of France?"
    assert trajectory["policy"] == {"kind": "hard", "order": ["plan", "search", "write"]}
    generated = [s for s in trajectory["steps"] if not s["forced"]]
    assert len(generated) == 2
    assert generated[0]["prefilled"] > 100  # the real prompt, with the tool list, went through
    assert all(s["decoded"] >= 1 for s in generated)
    assert trajectory["messages"][0] == {"role": "user", "content": "Capital of France?"}


def test_run_prints_a_table(tiny_backbone, tiny_adapters) -> None:
    result = invoke(
        "run",
        "--task",
        "Hi",
        "--backbone",
        str(tiny_backbone),
        *adapter_args(tiny_adapters),
        "--policy",
        "soft",
        "--no-kb",
        "--max-steps",
        "1",
        "--max-new-tokens",
        "3",
    )
    assert result.exit_code == 0, result.output
    assert "prefilled" in result.output
    assert "finish: " in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--adapter", "plan"], "is not NAME=DIR"),
        (["--adapter", "plan=/no/such/dir"], "is not a directory"),
        (["--policy", "greedy"], "'greedy' is not one of"),
        (["--order", "plan,draw"], "unknown capabilities draw"),
        (["--engine", "tpu"], "unknown engine 'tpu'"),
        (["--policy", "soft", "--guess", "search"], "is not FROM=TO"),
        (["--guess", "search=write"], "soft policy only"),
    ],
)
def test_bad_input_is_a_clear_error(tiny_backbone, tiny_adapters, args, message) -> None:
    base = ["run", "--task", "x", "--backbone", str(tiny_backbone)]
    result = CliRunner().invoke(app, ["runtime", *base, *adapter_args(tiny_adapters), *args])
    assert result.exit_code in (1, 2)
    assert message in result.output


def test_bad_backbone(tmp_path) -> None:
    result = CliRunner().invoke(
        app, ["runtime", "run", "--task", "x", "--backbone", str(tmp_path / "nope")]
    )
    assert result.exit_code == 2
    assert "is not a directory" in result.output


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_builds_a_guarded_app_on_localhost(tiny_backbone, tiny_adapters, monkeypatch):
    """`serve` in-process: the app it hands to uvicorn, then served for real."""
    import uvicorn
    from support.serving import serve

    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, host, port: seen.update(app=app, host=host))
    monkeypatch.setenv("WEACT_RUNTIME_TOKEN", "tok")
    monkeypatch.setenv("WEACT_RUNTIME_ADMIN_TOKEN", "adm")
    result = invoke("serve", "--backbone", str(tiny_backbone), *adapter_args(tiny_adapters))
    assert result.exit_code == 0, result.output
    assert seen["host"] == "127.0.0.1"
    with serve(seen["app"]) as base:
        assert httpx.get(f"{base}/healthz").status_code == 401
        ok = httpx.get(f"{base}/healthz", headers={"Authorization": "Bearer tok"})
        assert ok.json()["adapters"] == ["plan", "search", "write"]
        admin = httpx.get(f"{base}/v1/episodes", headers={"Authorization": "Bearer adm"})
        assert admin.status_code == 200
        assert httpx.get(f"{base}/livez").json() == {"status": "alive"}  # no token needed


@pytest.mark.slow
def test_serve_binds_localhost_and_requires_the_token(tiny_backbone, tiny_adapters) -> None:
    port = free_port()
    env = {**os.environ, "WEACT_RUNTIME_TOKEN": "tok"}
    weact = [sys.executable, "-c", "from cli.main import main; main()"]
    cmd = [*weact, "runtime", "serve", "--backbone", str(tiny_backbone)]
    proc = subprocess.Popen(
        [*cmd, *adapter_args(tiny_adapters), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        url = f"http://127.0.0.1:{port}/healthz"
        deadline = time.monotonic() + 60
        while True:
            try:
                response = httpx.get(url)
                break
            except httpx.ConnectError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert response.status_code == 401
        ok = httpx.get(url, headers={"Authorization": "Bearer tok"})
        assert ok.json()["adapters"] == ["plan", "search", "write"]
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def identity_adapter(backbone: Path, path: Path) -> Path:
    """A LoRA adapter as PEFT initialises it (B = 0): loaded or not, the model is unchanged."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(backbone)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    get_peft_model(model, config).save_pretrained(str(path))
    return path


@pytest.mark.slow
def test_run_on_the_packaged_smollm2(tmp_path: Path) -> None:
    """The real instruct model answers through the loop (soft policy). A node serves at least
    one adapter (a usage error otherwise, checked before loading); this one is freshly
    initialised, so whether the model loads it or not the answer is the backbone's."""
    from runtime.models import smollm2_dir

    plan = identity_adapter(smollm2_dir(), tmp_path / "plan")
    result = invoke(
        "run",
        "--task",
        "What is the capital of France? Answer in one sentence.",
        "--backbone",
        "smollm2",
        "--adapter",
        f"plan={plan}",
        "--policy",
        "soft",
        "--no-kb",
        "--max-steps",
        "1",
        "--max-new-tokens",
        "24",
        "--json",
    )
    assert result.exit_code == 0, result.output
    trajectory = json.loads(result.stdout)
    assert "Paris" in trajectory["answer"]
