"""Test data without torch: a fake backbone and PEFT-style LoRA adapters as safetensors.

Reusable by any registry test (and the CLI tests): everything is written with
``safetensors.numpy`` from seeded numpy arrays.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

from storage import manifest_of_file

HIDDEN = 32
INTERMEDIATE = 64
PEFT_PREFIX = "base_model.model."


def backbone_shapes(layers: int = 2, hidden: int = HIDDEN) -> dict[str, tuple[int, ...]]:
    """Tensor names and shapes of a tiny llama-like backbone (HF naming)."""
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (100, hidden)}
    for i in range(layers):
        prefix = f"model.layers.{i}"
        shapes[f"{prefix}.self_attn.q_proj.weight"] = (2 * hidden, hidden)
        shapes[f"{prefix}.self_attn.k_proj.weight"] = (hidden, hidden)
        shapes[f"{prefix}.self_attn.v_proj.weight"] = (hidden, hidden)
        shapes[f"{prefix}.self_attn.o_proj.weight"] = (hidden, 2 * hidden)
        shapes[f"{prefix}.mlp.up_proj.weight"] = (INTERMEDIATE, hidden)
        shapes[f"{prefix}.input_layernorm.weight"] = (hidden,)
    shapes["model.norm.weight"] = (hidden,)
    return shapes


def write_backbone(
    directory: Path, *, layers: int = 2, hidden: int = HIDDEN, seed: int = 0
) -> Path:
    """``directory/model.safetensors`` of a fake backbone; returns the file."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    tensors = {
        name: rng.standard_normal(shape).astype(np.float32)
        for name, shape in backbone_shapes(layers, hidden).items()
    }
    path = directory / "model.safetensors"
    save_file(tensors, str(path))
    return path


def backbone_manifest_json(path: Path) -> dict[str, Any]:
    return manifest_of_file(path).to_json()


def lora_modules(
    shapes: Mapping[str, tuple[int, ...]], target_modules: Iterable[str]
) -> dict[str, tuple[int, int]]:
    """Module path -> (out_features, in_features) for every targeted 2-D weight."""
    targets = set(target_modules)
    modules: dict[str, tuple[int, int]] = {}
    for name, shape in shapes.items():
        module = name.removesuffix(".weight")
        if len(shape) == 2 and module.rsplit(".", 1)[-1] in targets:
            modules[module] = (shape[0], shape[1])
    return modules


def adapter_tensors(
    shapes: Mapping[str, tuple[int, ...]],
    *,
    r: int = 4,
    target_modules: Iterable[str] = ("q_proj", "v_proj"),
    seed: int = 1,
) -> dict[str, np.ndarray]:
    """PEFT-named LoRA tensors (``base_model.model.<module>.lora_A.weight``)."""
    rng = np.random.default_rng(seed)
    tensors: dict[str, np.ndarray] = {}
    for module, (out_f, in_f) in lora_modules(shapes, target_modules).items():
        tensors[f"{PEFT_PREFIX}{module}.lora_A.weight"] = rng.standard_normal((r, in_f)).astype(
            np.float32
        )
        tensors[f"{PEFT_PREFIX}{module}.lora_B.weight"] = rng.standard_normal((out_f, r)).astype(
            np.float32
        )
    return tensors


def adapter_config(
    *, r: int = 4, alpha: float = 8, target_modules: Iterable[str] = ("q_proj", "v_proj")
) -> dict[str, Any]:
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": r,
        "lora_alpha": alpha,
        "target_modules": sorted(target_modules),
        "lora_dropout": 0.0,
        "bias": "none",
        "base_model_name_or_path": "fake-backbone",
    }


def write_adapter(
    directory: Path,
    *,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    r: int = 4,
    alpha: float = 8,
    target_modules: Iterable[str] = ("q_proj", "v_proj"),
    seed: int = 1,
    tensors: Mapping[str, np.ndarray] | None = None,
    config: Mapping[str, Any] | None = None,
) -> Path:
    """A PEFT adapter directory (adapter_model.safetensors + adapter_config.json)."""
    directory.mkdir(parents=True, exist_ok=True)
    targets = tuple(target_modules)
    shapes = shapes if shapes is not None else backbone_shapes()
    if tensors is None:
        tensors = adapter_tensors(shapes, r=r, target_modules=targets, seed=seed)
    save_file(dict(tensors), str(directory / "adapter_model.safetensors"))
    cfg = config if config is not None else adapter_config(r=r, alpha=alpha, target_modules=targets)
    (directory / "adapter_config.json").write_text(json.dumps(cfg, indent=2))
    return directory


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def adapter_files(directory: Path) -> dict[str, bytes]:
    """File name -> bytes of an adapter directory."""
    return {
        name: (directory / name).read_bytes()
        for name in ("adapter_config.json", "adapter_model.safetensors")
    }
