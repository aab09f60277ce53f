"""The adapter format check on a large backbone: ordinary configs vs the worst it accepts.

`storage.lora.check_adapter` runs at every registration and every engine load. This builds the
module layout of a 126-layer llama (882 linear modules, 1764 LoRA tensors; shapes only, no
weights) and times the check for a PEFT-style config, an EVA-style config (a rank_pattern key
per module, full dotted paths), and the most expensive configs the limits allow (8 patterns
with '.*' or '|'; 1024 pattern keys of 64 shapes), side by side with the ratio to the plain
config. Python's `re` on one catastrophic pattern that the check refuses is shown for
contrast (one module name, capped by a timeout).

    .venv/bin/python bench/bench_lora_format.py [--layers 126] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any

from storage.lora import MAX_PATTERN_KEYS, check_adapter, lora_key
from storage.lora.config import MAX_KEY_SHAPES, MAX_VARIABLE_PATTERNS
from storage.manifest import TensorEntry

LEAVES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
DIGEST = "0" * 64
TARGET_PATTERN = r".*\.(q|k|v|o|gate|up|down)_proj"


def layout(layers: int, hidden: int = 64, rank: int = 4) -> tuple[dict[str, Any], list[Any]]:
    backbone: dict[str, tuple[int, int]] = {}
    tensors = []
    for i in range(layers):
        for leaf in LEAVES:
            part = "mlp" if leaf in ("gate_proj", "up_proj", "down_proj") else "self_attn"
            module = f"model.layers.{i}.{part}.{leaf}"
            backbone[f"{module}.weight"] = (hidden, hidden)
            tensors.append(TensorEntry(lora_key(module, "A"), "F32", (rank, hidden), DIGEST))
            tensors.append(TensorEntry(lora_key(module, "B"), "F32", (hidden, rank), DIGEST))
    return backbone, sorted(tensors, key=lambda t: t.name)


def configs(backbone: dict[str, Any]) -> dict[str, dict[str, Any]]:
    base = {"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": list(LEAVES)}
    modules = [name.removesuffix(".weight") for name in backbone]
    half = MAX_VARIABLE_PATTERNS // 2
    star = {".*" * 60 + f"x{i}": 4 for i in range(half)}
    group = {"(" + "|".join(["a" * 5] * 20) + ")" + ".*." * 40 + f"q{i}": 4 for i in range(half)}
    shapes = range(MAX_PATTERN_KEYS)  # 1024 keys in MAX_KEY_SHAPES shapes
    wild = {f"model.layers.{'.' * (i % MAX_KEY_SHAPES)}self_attn.z{i:04d}": 4 for i in shapes}
    eva = dict.fromkeys(modules[:MAX_PATTERN_KEYS], 4)

    def patterns(keys: dict[str, int]) -> dict[str, Any]:
        return {**base, "rank_pattern": keys, "alpha_pattern": dict.fromkeys(keys, 8)}

    return {
        "peft-style (names)": base,
        "target pattern .*\\.(q|...)_proj": {**base, "target_modules": TARGET_PATTERN},
        "EVA-style (a key per module)": {**base, "rank_pattern": eva},
        "1024 keys of 64 shapes x2": patterns(wild),
        "8 patterns of 60 '.*'": patterns(star),
        "8 group patterns": patterns(group),
    }


def timed(
    config: dict[str, Any], tensors: list[Any], backbone: dict[str, Any], repeat: int
) -> float:
    raw = json.dumps(config)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        check_adapter(raw, tensors, backbone)
        best = min(best, time.perf_counter() - start)
    return best


def re_contrast(timeout: float = 10.0) -> str:
    code = "import re; re.fullmatch(r'(.*.*)*q_proj.x', 'model.layers.10.self_attn.q_proj')"
    start = time.perf_counter()
    try:
        subprocess.run([sys.executable, "-c", code], timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return f"> {timeout:.0f} s (killed)"
    return f"{time.perf_counter() - start:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=126)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    backbone, tensors = layout(args.layers)
    print(f"{len(backbone)} linear modules, {len(tensors)} LoRA tensors; best of {args.repeat}")
    results = {
        name: timed(c, tensors, backbone, args.repeat) for name, c in configs(backbone).items()
    }
    plain = next(iter(results.values()))
    print(f"{'config':40} {'check_adapter':>14} {'x plain':>8}")
    for name, seconds in results.items():
        print(f"{name:40} {seconds * 1000:11.1f} ms {seconds / plain:8.1f}")
    print(f"re.fullmatch('(.*.*)*q_proj.x', one module name): {re_contrast()}; refused here")


if __name__ == "__main__":
    main()
