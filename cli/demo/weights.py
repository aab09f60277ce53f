"""The demo's weights: a tiny llama backbone and four LoRA adapters (plan, search, write, write++).

With torch and peft installed they come from `runtime.tiny` (a random model saved by
transformers, adapters saved by peft); without them, `build_plain_weights` writes the same
llama-shaped layout as float32 safetensors with the standard library only (`--plain`).
"""

from __future__ import annotations

import array
import json
import random
import struct
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias


@dataclass(frozen=True)
class Weights:
    backbone: Path
    adapters: dict[str, Path]
    """Adapter directory by label: plan, search, write, write++."""
    kind: str


ADAPTER_SEEDS = {"plan": 1, "search": 2, "write": 3, "write++": 4}


def build_weights(root: Path) -> Weights:
    """A tiny llama backbone and four LoRA adapters: torch+peft if installed, else plain."""
    try:
        from transformers.utils import logging as hf_logging

        from runtime.tiny import build_tiny_adapter, build_tiny_backbone
    except ImportError:
        return build_plain_weights(root)
    hf_logging.disable_progress_bar()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # transformers deprecations, not ours
        backbone = build_tiny_backbone(root / "backbone")
        adapters = {
            label: build_tiny_adapter(backbone, root / label.replace("+", "p"), seed=seed)
            for label, seed in ADAPTER_SEEDS.items()
        }
    return Weights(backbone, adapters, "llama + peft (torch)")


PLAIN_HIDDEN, PLAIN_LAYERS, PLAIN_VOCAB, PLAIN_RANK = 32, 2, 128, 4
Tensors: TypeAlias = "dict[str, tuple[tuple[int, ...], array.array[float]]]"


def build_plain_weights(root: Path) -> Weights:
    """The same layout without torch: llama-shaped safetensors written with the stdlib."""
    backbone = root / "backbone"
    backbone.mkdir(parents=True)
    write_safetensors(backbone / "model.safetensors", _plain_backbone_tensors(seed=0))
    adapters = {}
    for label, seed in ADAPTER_SEEDS.items():
        path = root / label.replace("+", "p")
        path.mkdir()
        write_safetensors(path / "adapter_model.safetensors", _plain_lora_tensors(seed))
        (path / "adapter_config.json").write_text(json.dumps(_plain_lora_config(), indent=2))
        adapters[label] = path
    return Weights(backbone, adapters, "llama-shaped safetensors (no torch)")


def _plain_backbone_tensors(seed: int) -> Tensors:
    h, v = PLAIN_HIDDEN, PLAIN_VOCAB
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (v, h),
        "model.norm.weight": (h,),
        "lm_head.weight": (v, h),
    }
    for i in range(PLAIN_LAYERS):
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            shapes[f"model.layers.{i}.self_attn.{proj}.weight"] = (h, h)
    return {
        name: (shape, _random_floats(shape, seed + n))
        for n, (name, shape) in enumerate(shapes.items())
    }


def _plain_lora_tensors(seed: int) -> Tensors:
    h, r = PLAIN_HIDDEN, PLAIN_RANK
    tensors: Tensors = {}
    for i in range(PLAIN_LAYERS):
        for proj in ("q_proj", "v_proj"):
            prefix = f"base_model.model.model.layers.{i}.self_attn.{proj}"
            for part, shape in (("lora_A", (r, h)), ("lora_B", (h, r))):
                name = f"{prefix}.{part}.weight"
                tensors[name] = (shape, _random_floats(shape, seed * 1000 + len(tensors)))
    return tensors


def _plain_lora_config() -> dict[str, Any]:
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": None,
        "r": PLAIN_RANK,
        "lora_alpha": 2 * PLAIN_RANK,
        "lora_dropout": 0.0,
        "bias": "none",
        "target_modules": ["q_proj", "v_proj"],
        "inference_mode": True,
    }


def _random_floats(shape: Sequence[int], seed: int) -> array.array[float]:
    rng = random.Random(seed)
    count = 1
    for dim in shape:
        count *= dim
    return array.array("f", (rng.gauss(0.0, 0.2) for _ in range(count)))


def write_safetensors(path: Path, tensors: Tensors) -> None:
    """A float32 safetensors file from stdlib arrays (little-endian, offsets in name order)."""
    header: dict[str, Any] = {}
    chunks: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        shape, values = tensors[name]
        if sys.byteorder != "little":
            values = array.array("f", values)
            values.byteswap()
        data = values.tobytes()
        header[name] = {
            "dtype": "F32",
            "shape": list(shape),
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(chunks))
