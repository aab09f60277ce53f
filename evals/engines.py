"""The engines an evaluation runs on, and the key of the library it evaluates.

Shared by `weact eval run` (`evals.run_cli`) and the reproduce run (`evals.reproduce`), so
both size, start and stop an engine the same way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from runtime.progress import Steps

SMOLLM2 = "smollm2"
"""The `--backbone` that names the shipped SmolLM2-135M (converted once)."""


def library_key(adapters: Mapping[str, str]) -> str:
    """sha256 over {capability: manifest root} of the adapter directories."""
    from storage.manifest import manifest_of_path

    roots = {name: manifest_of_path(path).root for name, path in sorted(adapters.items())}
    return hashlib.sha256(json.dumps(roots, sort_keys=True).encode()).hexdigest()


def vllm_cpu_args(backbone: str, sequences: int, dtype: str | None = None) -> dict[str, Any]:
    """vLLM's CPU build: bf16 where it can (or `dtype`), short contexts, and a KV cache (host
    RAM) that holds `sequences` full contexts at once, at least 1 GiB: a smaller one preempts
    episodes and recomputes them (`bench/bench_vllm_kv.py`: 40 requests of ~2,200 tokens
    decode 27 tok/s in 1 GiB, 87 tok/s in the 3.5 GiB this sizes). Read when an engine
    starts."""
    from runtime.engines.vllm.engine import cpu_dtype, kv_cache_bytes

    dtype, max_len = dtype or cpu_dtype(), 4096
    return {
        "dtype": dtype,
        "max_model_len": max_len,
        "block_size": 32,
        "kv_cache_memory_bytes": max(2**30, kv_cache_bytes(backbone, sequences, max_len, dtype)),
    }


def make_engine(
    backbone: str,
    adapters: Mapping[str, str],
    kind: str = "peft",
    sequences: int = 4,
    *,
    steps: Steps | None = None,
) -> Any:
    """A `PeftEngine` (reference) or `VllmEngine` (batched; vLLM installed) for a library;
    `backbone` 'smollm2' is converted on first use, its steps told to `steps`."""
    from runtime.engine import AdapterSpec
    from tasks.trajectories import DESCRIPTIONS

    if backbone == SMOLLM2:
        from runtime.models import smollm2_dir

        backbone = str(smollm2_dir(steps=steps))
    specs = [
        AdapterSpec(name, path, description=DESCRIPTIONS.get(name, ""))
        for name, path in sorted(adapters.items())
    ]
    if kind == "vllm":
        from runtime.engines.vllm import VllmEngine

        return VllmEngine(backbone, specs, **vllm_cpu_args(backbone, sequences))
    from runtime.engines.peft import PeftEngine

    return PeftEngine(backbone, specs)


def close_engine(engine: Any) -> None:
    """Stop an engine that holds processes (vLLM); the reference engine holds none."""
    close = getattr(engine, "close", None)
    if callable(close):
        close()
