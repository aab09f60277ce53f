"""Follower install benchmark: a revision of 3 SmolLM2-135M-sized LoRA adapters, pulled from a
real `weact serve` (`runtime.sync.pull_library`) and fitted into `PeftEngine`
(`set_library`), then the next revision (one adapter new, two kept).

The adapters are what a rank-8 LoRA over SmolLM2-135M is (llama, hidden 576, 30 layers,
9 heads / 3 KV heads, MLP 1536; q/k/v/o/gate/up/down; float32 as PEFT saves them: 9.8 MB
each), written as PEFT directories with random weights; the backbone is a randomly
initialised model of SmolLM2-135M's shapes in bfloat16 (no download). Per phase, in this
(the follower's) process only, the server being another process:

- wall time;
- bytes read: `rchar` of /proc/self/io (every read syscall, files and sockets) and the
  bytes `safetensors` maps to load (mmap reads are not syscalls);
- sha256 work: the bytes fed to every sha256 of the process and the number of hashers;
- and the bytes `weact serve`'s process read (`rchar` of its /proc/PID/io) to serve it.

    PYTHONPATH=$PWD .venv/bin/python bench/bench_follower_install.py [--rounds 3]

Run with another checkout first on PYTHONPATH to measure it (the code measured is printed).
The audit of the resident weights after each install is timed apart: it hashes the 135M
backbone each time and is not part of the install.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np

os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("WEACT_PROGRESS", "0")
warnings.filterwarnings("ignore")

HIDDEN, LAYERS, MLP, KV = 576, 30, 1536, 192  # SmolLM2-135M; KV = 3 heads x 64
RANK = 8
MODULES = {  # module -> (out, in)
    "self_attn.q_proj": (HIDDEN, HIDDEN),
    "self_attn.k_proj": (KV, HIDDEN),
    "self_attn.v_proj": (KV, HIDDEN),
    "self_attn.o_proj": (HIDDEN, HIDDEN),
    "mlp.gate_proj": (MLP, HIDDEN),
    "mlp.up_proj": (MLP, HIDDEN),
    "mlp.down_proj": (HIDDEN, MLP),
}
CAPABILITIES = ["plan", "search", "write"]


class Counters:
    """sha256 bytes and hashers, and bytes safetensors mapped, in this process."""

    def __init__(self) -> None:
        self.hashed = 0
        self.hashers = 0
        self.mapped = 0

        self.server_pid = 0  # `weact serve`'s process, whose reads are counted too

    def snapshot(self) -> dict[str, int]:
        return {"rchar": _rchar("self"), "hashed": self.hashed, "hashers": self.hashers,
                "mapped": self.mapped, "server": _rchar(str(self.server_pid))}  # fmt: skip


COUNTERS = Counters()


class _CountingHash:
    def __init__(self, inner: Any) -> None:
        self._inner = inner
        COUNTERS.hashers += 1

    def update(self, data: Any) -> None:
        COUNTERS.hashed += memoryview(data).nbytes
        self._inner.update(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _count_hashing() -> None:
    """Every sha256 of this process counted (hashlib.sha256, hashlib.new, file_digest)."""
    real_sha256, real_new = hashlib.sha256, hashlib.new

    def sha256(data: Any = b"", **kw: Any) -> _CountingHash:
        h = _CountingHash(real_sha256(**kw))
        if data:
            h.update(data)
        return h

    def new(name: str, data: Any = b"", **kw: Any) -> Any:
        if name.lower() != "sha256":
            return real_new(name, data, **kw)
        return sha256(data)

    hashlib.sha256 = sha256  # type: ignore[assignment]
    hashlib.new = new  # type: ignore[assignment]


def _count_mapping() -> None:
    import safetensors.torch

    real = safetensors.torch.load_file

    def load_file(filename: Any, *args: Any, **kw: Any) -> Any:
        COUNTERS.mapped += os.path.getsize(filename)
        return real(filename, *args, **kw)

    safetensors.torch.load_file = load_file


def _rchar(pid: str) -> int:
    """Bytes read by the process's read syscalls (files; socket receives are not counted)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


def write_adapter(directory: Path, seed: int) -> Path:
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    tensors = {}
    for layer in range(LAYERS):
        for module, (out, inp) in MODULES.items():
            prefix = f"base_model.model.model.layers.{layer}.{module}"
            tensors[f"{prefix}.lora_A.weight"] = rng.standard_normal((RANK, inp), np.float32)
            tensors[f"{prefix}.lora_B.weight"] = rng.standard_normal((out, RANK), np.float32)
    directory.mkdir(parents=True)
    save_file(tensors, str(directory / "adapter_model.safetensors"))
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": "HuggingFaceTB/SmolLM2-135M",
        "r": RANK,
        "lora_alpha": 2 * RANK,
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": False,
        "use_rslora": False,
        "target_modules": sorted(m.split(".")[1] for m in MODULES),
        "rank_pattern": {},
        "alpha_pattern": {},
        "modules_to_save": None,
        "inference_mode": True,
    }
    (directory / "adapter_config.json").write_text(json.dumps(config, indent=2))
    return directory


def smollm2_shaped_model() -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=49152, hidden_size=HIDDEN, intermediate_size=MLP, num_hidden_layers=LAYERS,
        num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=True,
        max_position_embeddings=2048,
    )  # fmt: skip
    return LlamaForCausalLM(config).to(torch.bfloat16).eval()


@contextlib.contextmanager
def weact_serve(workdir: Path) -> Iterator[tuple[str, str]]:
    """`weact serve` (SQLite, local blobs) on a free port; yields (url, admin token).

    One uvicorn process (`--workers 1`) whose pid is the child's: its reads are counted."""
    import socket

    weact = [sys.executable, "-c", "from cli.main import main; main()"]
    database = f"sqlite:///{workdir / 'registry.db'}"
    made = subprocess.run(
        [*weact, "token", "create", "--name", "root", "--role", "admin", "--database-url",
         database, "--json"], capture_output=True, text=True, check=True,
    )  # fmt: skip
    token = json.loads(made.stdout)["token"]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [*weact, "serve", "--port", str(port), "--log-level", "warning", "--workers", "1",
            "--database-url", database, "--store", str(workdir / "blobs")]  # fmt: skip
    with open(workdir / "serve.log", "wb") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/v1/healthz", timeout=2).status_code == 200:
                    break
            if process.poll() is not None:
                raise RuntimeError((workdir / "serve.log").read_text()[-2000:])
            time.sleep(0.1)
        COUNTERS.server_pid = process.pid
        yield url, token
    finally:
        process.terminate()
        process.wait(timeout=10)


def measure(what: Callable[[], Any]) -> tuple[Any, dict[str, float]]:
    before, start = COUNTERS.snapshot(), time.perf_counter()
    result = what()
    elapsed = time.perf_counter() - start
    after = COUNTERS.snapshot()
    return result, {"s": elapsed, **{k: after[k] - before[k] for k in after}}


def install(
    node: Any, engine: Any, channel: str, dest: Path, rows: dict[str, list[dict[str, float]]]
) -> None:
    """Pull the channel's revision, fit it into the engine, audit; each phase measured."""
    from runtime import sync

    (_, specs), pull = measure(lambda: sync.pull_library(node, channel, dest))
    _, fit = measure(lambda: engine.set_library(specs))
    report, audit = measure(engine.audit)
    assert report.ok, report.detail
    engine.release_unused()
    for key, value in (("pull", pull), ("fit", fit), ("audit", audit)):
        rows.setdefault(f"{channel} {key}", []).append(value)
    total = {k: pull[k] + fit[k] for k in pull}
    rows.setdefault(f"{channel} install (pull+fit)", []).append(total)


def _row(label: str, runs: list[dict[str, float]]) -> str:
    first = runs[0]
    mb = 1e6
    return (
        f"{label:<28} {statistics.median(r['s'] for r in runs):7.3f} s  "
        f"read {first['rchar'] / mb:6.1f} MB + mapped {first['mapped'] / mb:5.1f} MB  "
        f"sha256 {first['hashed'] / mb:6.1f} MB in {int(first['hashers']):5d} hashers  "
        f"| server read {first['server'] / mb:6.1f} MB"
    )


def publish(url: str, token: str, adapters: list[Path], backbone: dict[str, Any]) -> str:
    """Register the backbone, push and approve the 4 adapters, promote channel `prod` (the
    first 3) and `next` (a new write); a node token."""
    from registry.client import RegistryClient

    with RegistryClient(url, token) as admin:
        root = admin.register_backbone(name="smollm2-135m", manifest=backbone)["root"]
        for order, name in enumerate(CAPABILITIES):
            admin.create_capability(name=name, description=name, order=order)
        roles = (("alice", "publisher"), ("bob", "approver"), ("node-1", "node"))
        tokens = [admin.create_token(name=n, role=r)["token"] for n, r in roles]
    with RegistryClient(url, tokens[0]) as alice, RegistryClient(url, tokens[1]) as bob:
        ids = []
        for i, path in enumerate(adapters):
            pushed = alice.push_adapter(path, capability=CAPABILITIES[min(i, 2)], backbone=root)
            ids.append(bob.approve(pushed["id"])["id"])
        first = dict(zip(CAPABILITIES, ids[:3], strict=True))
        bob.promote("prod", first, backbone=root, order=CAPABILITIES, create=True)
        second = {**first, "write": ids[3]}
        bob.promote("next", second, backbone=root, order=CAPABILITIES, create=True)
    return tokens[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from registry.client import RegistryClient
    from runtime import sync
    from runtime.audit import manifest_of_resident
    from runtime.engines.peft import PeftEngine

    print(f"code measured: {Path(sync.__file__).resolve().parents[1]}")
    with tempfile.TemporaryDirectory(prefix="weact-bench-install-") as tmp:
        work = Path(tmp)
        adapters = [write_adapter(work / "src" / f"a{i}", seed=i) for i in range(4)]
        size = sum(f.stat().st_size for f in adapters[0].iterdir())
        model = smollm2_shaped_model()
        tensors = {n: p for n, p in model.named_parameters()}
        backbone = manifest_of_resident(tensors)
        with weact_serve(work) as (url, token):
            node_token = publish(url, token, adapters, backbone.to_json())
            _count_hashing()
            _count_mapping()
            rows: dict[str, list[dict[str, float]]] = {}
            with RegistryClient(url, node_token) as node:
                for r in range(args.rounds):
                    engine = PeftEngine(model, backbone_root=backbone.root)
                    for channel in ("prod", "next"):
                        install(node, engine, channel, work / f"node-{r}", rows)
        print(f"3 adapters of {size / 1e6:.1f} MB each (rank {RANK}, SmolLM2-135M shapes, fp32); "
              f"median of {args.rounds} rounds, bytes of the first")  # fmt: skip
        print("revision 1 (prod): 3 new adapters; revision 2 (next): write new, plan+search kept")
        for label, runs in rows.items():
            print(_row(label, runs))


if __name__ == "__main__":
    main()
