"""Does a PEFT LoRA directory fit a backbone? Read from safetensors headers, no torch.

An engine that does not hold the backbone in its own process (vLLM keeps it in a worker)
still validates a batch of adapters before loading any: `adapter_problems` reads
`adapter_config.json` and the header of `adapter_model.safetensors` and checks every
`base_model.model.<module>.lora_A.weight` / `lora_B.weight` pair against the backbone's
`<module>.weight` shape, the way the reference engine checks against its `nn.Linear`s.
Every problem is returned, none raised, so a caller can report a whole batch at once.

(The project is moving adapter-format parsing into a torch-free `storage` module; this one
should call it once that lands.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from storage.errors import StorageError
from storage.manifest import read_header, safetensors_files

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"
PEFT_PREFIX = "base_model.model."
FLOAT_DTYPES = frozenset({"F16", "BF16", "F32", "F64"})

Shapes = Mapping[str, tuple[int, ...]]


def backbone_shapes(backbone_dir: Path) -> dict[str, tuple[int, ...]]:
    """tensor name -> shape over every `*.safetensors` shard of the backbone directory."""
    shapes: dict[str, tuple[int, ...]] = {}
    for shard in safetensors_files(backbone_dir):
        for info in read_header(shard).tensors:
            shapes[info.name] = tuple(info.shape)
    return shapes


def read_config(path: Path, problems: list[str]) -> dict[str, Any]:
    """The adapter's PEFT config, with what this runtime cannot serve added to `problems`."""
    try:
        cfg = json.loads((path / CONFIG_FILE).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        problems.append(f"{CONFIG_FILE}: {exc}")
        return {}
    if not isinstance(cfg, dict):
        problems.append(f"{CONFIG_FILE}: not a JSON object")
        return {}
    if cfg.get("peft_type", "LORA") != "LORA":
        problems.append(f"peft_type {cfg.get('peft_type')!r} is not LORA")
    for key, ok in (("use_dora", False), ("fan_in_fan_out", False), ("bias", "none")):
        if cfg.get(key, ok) not in (ok, None):
            problems.append(f"{key}={cfg[key]!r} is not supported")
    r, alpha = cfg.get("r"), cfg.get("lora_alpha")
    if not isinstance(r, int) or isinstance(r, bool) or r <= 0:
        problems.append(f"r must be a positive integer, got {r!r}")
    if not isinstance(alpha, int | float) or isinstance(alpha, bool):
        problems.append(f"lora_alpha must be a number, got {alpha!r}")
    return cfg


def _pattern(patterns: Mapping[str, Any] | None, module: str, default: Any) -> Any:
    """peft's rank_pattern lookup: a key matches a module path suffix."""
    for key, value in (patterns or {}).items():
        if module == key or module.endswith("." + key):
            return value
    return default


def _pairs(path: Path, problems: list[str]) -> dict[str, dict[str, tuple[int, ...]]]:
    """module -> {"A": shape, "B": shape} from the weights file's header."""
    try:
        tensors = read_header(path / WEIGHTS_FILE).tensors
    except (OSError, StorageError) as exc:
        problems.append(f"{WEIGHTS_FILE}: {exc}")
        return {}
    pairs: dict[str, dict[str, tuple[int, ...]]] = {}
    for info in tensors:
        split = _split_key(info.name)
        if split is None:
            problems.append(f"unsupported tensor {info.name!r} (only lora_A/lora_B weights)")
        elif info.dtype not in FLOAT_DTYPES:
            problems.append(f"{info.name}: dtype {info.dtype} is not floating point")
        else:
            pairs.setdefault(split[0], {})[split[1]] = tuple(info.shape)
    if not tensors:
        problems.append("no LoRA tensors")
    return pairs


def _split_key(key: str) -> tuple[str, str] | None:
    """`base_model.model.<module>.lora_A.weight` -> (module, "A"); None if not of that form."""
    for part in ("A", "B"):
        suffix = f".lora_{part}.weight"
        if key.startswith(PEFT_PREFIX) and key.endswith(suffix):
            return key[len(PEFT_PREFIX) : -len(suffix)], part
    return None


def adapter_rank(path: Path) -> int:
    """The largest rank of a (valid) adapter: `r` and every `rank_pattern` value."""
    cfg = read_config(path, [])
    ranks = [cfg.get("r"), *(cfg.get("rank_pattern") or {}).values()]
    return max((r for r in ranks if isinstance(r, int) and not isinstance(r, bool)), default=0)


def adapter_problems(path: Path, backbone: Shapes, max_rank: int) -> list[str]:
    """Everything that keeps the adapter at `path` from being served on `backbone`."""
    problems: list[str] = []
    cfg = read_config(path, problems)
    pairs = _pairs(path, problems)
    if problems:
        return problems
    for module, pair in sorted(pairs.items()):
        if set(pair) != {"A", "B"}:
            problems.append(f"{module}: lora_A and lora_B must both be present")
            continue
        rank = int(_pattern(cfg.get("rank_pattern"), module, cfg["r"]))
        if rank > max_rank:
            problems.append(f"{module}: rank {rank} exceeds the engine's max_lora_rank {max_rank}")
        base = backbone.get(f"{module}.weight")
        if base is None or len(base) != 2:
            problems.append(f"{module}: no linear weight of that name in the backbone")
            continue
        out_f, in_f = base
        if pair["A"] != (rank, in_f) or pair["B"] != (out_f, rank):
            problems.append(
                f"{module}: lora_A {list(pair['A'])} / lora_B {list(pair['B'])} do not fit "
                f"[{rank}, {in_f}] / [{out_f}, {rank}] (rank {rank}, base {[out_f, in_f]})"
            )
    return problems
