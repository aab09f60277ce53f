"""The registry as a LoRA source for a stock vLLM server, end to end on loopback.

A real `weact serve` (SQLite, local blobs) holds SmolLM2 as backbone and plan@1, write@1
(promoted to channel prod) and write@2, whose weights blob is then corrupted in the store.
A real `python -m vllm.entrypoints.openai.api_server` process with runtime LoRA updating and
only this project's resolver plugin (`VLLM_PLUGINS=weact_registry`) answers completions for
`prod/plan`, `plan@1` and `write@1` by pulling and verifying them, with greedy tokens the
reference engine reproduces; it refuses the tampered `write@2` and an unknown version.
The shared in-process engine is shut down first: one vLLM at a time on this machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from vllm_support import QUESTIONS, chat_prompt, corrupt, divergence, publish, wait_healthy

from registry.launcher import embedded_registry, free_port
from storage.manifest import manifest_of_file

pytestmark = pytest.mark.vllm

NEAR_TIE = 0.02  # as in test_vllm_equivalence
WEIGHTS = "adapter_model.safetensors"


@dataclass
class Setup:
    url: str  # the vLLM server
    library: Path  # where the resolver puts verified adapters
    adapters: dict[str, dict[str, Any]]  # version name -> registry Adapter
    log: Path  # the server's output


@pytest.fixture(scope="module")
def server(
    no_inprocess_vllm: None,
    smollm2: Path,
    adapter_dir: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Setup]:
    workdir = tmp_path_factory.mktemp("resolver")
    with embedded_registry(workdir) as registry:
        published = publish(registry, adapter_dir, smollm2)
        adapters = published["adapters"]
        corrupt(registry.store_url, adapters["write@2"]["files"][WEIGHTS])
        library = workdir / "library"
        port = free_port()
        env = {
            **os.environ,
            "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "true",
            "VLLM_PLUGINS": "weact_registry",
            "WEACT_VLLM_REGISTRY_URL": registry.url,
            "WEACT_VLLM_REGISTRY_TOKEN": published["reader"],
            "WEACT_VLLM_LIBRARY_DIR": str(library),
        }
        argv = [
            sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(smollm2),
            "--host", "127.0.0.1", "--port", str(port), "--enable-lora", "--max-loras", "2",
            "--max-lora-rank", "8", "--dtype", "float32", "--max-model-len", "2048",
            "--block-size", "32", "--kv-cache-memory-bytes", str(256 * 2**20),
        ]  # fmt: skip
        log = workdir / "vllm.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_healthy(url, process, log)
            yield Setup(url, library, adapters, log)
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def complete(setup: Setup, model: str, prompt: list[int]) -> httpx.Response:
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": 16,
        "temperature": 0,
        "ignore_eos": True,
        "return_token_ids": True,
    }
    return httpx.post(f"{setup.url}/v1/completions", json=body, timeout=300)


def tokens_of(response: httpx.Response) -> list[int]:
    assert response.status_code == 200, response.text
    return list(response.json()["choices"][0]["token_ids"])


def test_versions_and_channel_names_resolve_verified_from_the_registry(
    server: Setup, peft_engine: Any
) -> None:
    prompt = chat_prompt(peft_engine.tokenizer, QUESTIONS[2])
    by_channel = tokens_of(complete(server, "prod/plan", prompt))
    by_version = tokens_of(complete(server, "plan@1", prompt))
    write = tokens_of(complete(server, "write@1", prompt))
    bare = tokens_of(complete(server, str(base_model(server)), prompt))
    assert by_channel == by_version
    assert len({tuple(by_channel), tuple(write), tuple(bare)}) == 3
    for config, tokens in (("plan", by_channel), ("write", write), (None, bare)):
        d = divergence(peft_engine, config, prompt, tokens)
        assert d is None or d.margin <= NEAR_TIE, d
    for version in ("plan@1", "write@1"):
        pulled = server.library / version / WEIGHTS
        assert manifest_of_file(pulled).root == server.adapters[version]["manifest_root"]


def test_a_tampered_blob_and_an_unknown_version_are_refused(
    server: Setup, peft_engine: Any
) -> None:
    prompt = chat_prompt(peft_engine.tokenizer, QUESTIONS[0])
    for model in ("write@2", "write@9", "nochannel/plan"):
        response = complete(server, model, prompt)
        assert response.status_code == 404, (model, response.text)
    assert not (server.library / "write@2").exists()
    refusal = next(line for line in server.log.read_text().splitlines() if "'write@2'" in line)
    assert "refusing" in refusal
    blob = server.adapters["write@2"]["files"][WEIGHTS]  # the corrupted one, named
    assert blob in refusal or "digest" in refusal.lower(), refusal
    assert tokens_of(complete(server, "plan@1", prompt))  # the server still serves


def base_model(setup: Setup) -> str:
    """The base model's name as the server knows it (its path)."""
    models = httpx.get(f"{setup.url}/v1/models", timeout=10).json()["data"]
    return str(models[0]["id"])
