"""Test support for the vLLM suite (not shipped): SmolLM2 adapters, prompts, comparisons."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]

QUESTIONS = [
    "What is the capital of France?",
    "Explain photosynthesis in two sentences.",
    "Plan the steps to compare two water supply systems.",
    "Write a short report on the first Everest ascent.",
    "Which river flows north through Egypt?",
    "Search for sources about Roman aqueducts.",
    "List three uses of the Python programming language.",
    "How do qanats move water underground?",
    "Summarise the history of the printing press.",
    "What year did Hillary and Norgay reach the summit?",
    "Give a plan for writing a literature review.",
    "Compare solar and wind power in one paragraph.",
    "Why is the sky blue?",
    "Draft an outline for a report on city transport.",
    "Who released Python in 1991?",
    "Describe how a search engine ranks documents.",
    "What should a good research plan contain?",
    "Write two sentences about the Mediterranean Sea.",
    "How does a LoRA adapter change a language model?",
    "Name the steps of the scientific method.",
]


def build_adapters(backbone: Path, root: Path, seeds: Mapping[str, int]) -> dict[str, Path]:
    """Random rank-8 PEFT LoRAs on q, k, v, o, one per version name, fixed seeds.

    The weights are large enough (std 0.05) that each adapter visibly changes greedy
    outputs, and different seeds give different weights under the same capability.
    """
    import torch
    from peft import LoraConfig, get_peft_model

    from runtime.models import load_backbone

    config = LoraConfig(r=8, lora_alpha=16, target_modules=TARGETS, init_lora_weights=False)
    out = {}
    for version, seed in seeds.items():
        model = get_peft_model(load_backbone(backbone), config)
        torch.manual_seed(seed)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_" in name:
                    p.normal_(0.0, 0.05)
        path = root / version.replace("@", "-")
        model.save_pretrained(path)
        out[version] = path
    return out


def chat_prompt(tokenizer: Any, question: str) -> list[int]:
    """A ChatML prompt in the runtime's own format, ending in the assistant header."""
    from runtime.chat import ASSISTANT_HEADER, render_message, render_system

    text = render_system(None, None) + render_message({"role": "user", "content": question})[0]
    return list(tokenizer.encode(text + ASSISTANT_HEADER, add_special_tokens=False))


@dataclass(frozen=True)
class Divergence:
    """Where vLLM's greedy tokens first leave the reference's, and how close a call it was."""

    config: str
    prompt: int
    position: int  # index into the generated tokens
    reference: int  # the reference engine's argmax there
    other: int  # vLLM's token there
    margin: float  # reference logits: its top-1 minus vLLM's token (0 at an exact tie)


def reference_logits(engine: Any, config: str | None, ids: Sequence[int]) -> Any:
    """The reference engine's logits at every position of `ids` under `config` (one pass).

    The PeftEngine's own model with its LoRA hooks, the adapter selected by its version key
    through the engine's shared holder (as its sessions do before each forward pass; the
    tests use the reference engine from one thread, as bench_runtime does).
    """
    import torch

    from runtime.engines.peft import weight_key

    key = None if config is None else weight_key(engine.adapters[config])
    with torch.inference_mode():
        engine.holder.name = key
        try:
            return engine.model(input_ids=torch.tensor([list(ids)])).logits[0].float()
        finally:
            engine.holder.name = None


def divergence(
    engine: Any, config: str | None, prompt: Sequence[int], tokens: Sequence[int], index: int = 0
) -> Divergence | None:
    """Teacher-forced check of `tokens` (vLLM's greedy continuation of `prompt`).

    Greedy decoding reproduces `tokens` exactly when every token is the reference's argmax
    given the tokens before it; the first position where it is not is where the reference's
    own greedy decode would turn away, and its logit margin there says how close a call it was.
    """
    logits = reference_logits(engine, config, list(prompt) + list(tokens))
    start = len(prompt) - 1
    for i, token in enumerate(tokens):
        row = logits[start + i]
        best = int(row.argmax())
        if best != token:
            margin = float(row[best] - row[token])
            return Divergence(str(config), index, i, best, token, margin)
    return None


def publish(registry: Any, adapter_dir: Mapping[str, Path], backbone: Path) -> dict[str, Any]:
    """SmolLM2 and the adapters in a running `weact serve`; plan@1 + write@1 promoted to prod."""
    from registry.client import RegistryClient
    from storage.manifest import manifest_of_path

    admin = RegistryClient(registry.url, registry.bootstrap_token("a", "admin"))
    alice = RegistryClient(
        registry.url, admin.create_token(name="alice", role="publisher")["token"]
    )
    bob = RegistryClient(registry.url, admin.create_token(name="bob", role="approver")["token"])
    root = admin.register_backbone(name="smollm2", manifest=manifest_of_path(backbone).to_json())
    for order, name in enumerate(("plan", "write")):
        admin.create_capability(name=name, description=f"{name} phase", order=order)
    adapters = {}
    for version, path in adapter_dir.items():
        pushed = alice.push_adapter(path, capability=version.split("@")[0], backbone=root["root"])
        assert pushed["name"] == version
        adapters[version] = bob.approve(pushed["id"])
    ids = {"plan": adapters["plan@1"]["id"], "write": adapters["write@1"]["id"]}
    bob.promote("prod", ids, backbone=root["root"], order=["plan", "write"], create=True)
    tokens = {
        role: admin.create_token(name=f"vllm-{role}", role=role)["token"]
        for role in ("reader", "node", "approver")
    }
    for client in (admin, alice, bob):
        client.close()
    return {"adapters": adapters, "root": root["root"], **tokens}


def corrupt(store_url: str, digest: str) -> None:
    """Flip bits of a stored blob behind the registry's back."""
    from storage.local import LocalBlobStore

    path = LocalBlobStore(store_url).path_of(digest)
    data = bytearray(path.read_bytes())
    data[-5] ^= 0x55
    path.write_bytes(bytes(data))


def wait_healthy(
    url: str, process: subprocess.Popen[bytes], log: Path, path: str = "/health"
) -> None:
    """Until `url + path` answers 200 (vLLM starts in about a minute here), or the log."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}{path}", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise RuntimeError(f"server not healthy:\n{log.read_text()[-3000:]}")
