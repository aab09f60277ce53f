"""Does a PEFT LoRA adapter fit a backbone? Pure checks, every problem collected at once.

PEFT saves ``base_model.model.<module>.lora_A.weight`` with shape ``[r, in_features]`` and
``...lora_B.weight`` with ``[out_features, r]`` for a backbone weight ``<module>.weight`` of
shape ``[out_features, in_features]``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from registry.errors import IncompatibleAdapterError
from storage import Manifest, TensorEntry

PEFT_PREFIX = "base_model.model."
LORA_KEY = re.compile(r"^(?P<module>.+)\.lora_(?P<which>[AB])\.weight$")
MAX_CONFIG_BYTES = 1024 * 1024


@dataclass(frozen=True)
class LoraConfig:
    r: int
    alpha: float
    target_modules: list[str]
    rank_pattern: dict[str, int]


def _problem(message: str, problems: list[str] | None = None) -> IncompatibleAdapterError:
    return IncompatibleAdapterError({"message": message, "problems": problems or [message]})


def _targets(raw: Any) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and all(isinstance(t, str) for t in raw):
        return sorted(raw)
    raise _problem("adapter_config.json: target_modules must be a string or a list of strings")


def parse_config(raw: bytes) -> LoraConfig:
    """Parse ``adapter_config.json`` (a PEFT LoRA config)."""
    try:
        obj = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _problem(f"adapter_config.json is not valid JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise _problem("adapter_config.json must be a JSON object")
    if obj.get("peft_type", "LORA") != "LORA":
        raise _problem(f"adapter_config.json: peft_type {obj.get('peft_type')!r} is not LORA")
    r, alpha = obj.get("r"), obj.get("lora_alpha", obj.get("r"))
    if not isinstance(r, int) or isinstance(r, bool) or r < 1:
        raise _problem("adapter_config.json: r must be a positive integer")
    if not isinstance(alpha, int | float) or isinstance(alpha, bool):
        raise _problem("adapter_config.json: lora_alpha must be a number")
    pattern = obj.get("rank_pattern") or {}
    if not isinstance(pattern, dict) or not all(isinstance(v, int) for v in pattern.values()):
        raise _problem("adapter_config.json: rank_pattern must map names to integers")
    return LoraConfig(r, float(alpha), _targets(obj.get("target_modules")), dict(pattern))


def _rank_for(config: LoraConfig, module: str) -> int:
    for key, rank in config.rank_pattern.items():
        if module == key or module.endswith("." + key):
            return rank
    return config.r


def _targeted(config: LoraConfig, module: str) -> bool:
    if not config.target_modules:
        return True
    if len(config.target_modules) == 1 and not config.target_modules[0].isidentifier():
        return re.fullmatch(config.target_modules[0], module) is not None
    leaf = module.rsplit(".", 1)[-1]
    return leaf in config.target_modules or any(
        module.endswith("." + t) for t in config.target_modules
    )


def _group(adapter: Manifest, problems: list[str]) -> dict[str, dict[str, TensorEntry]]:
    modules: dict[str, dict[str, TensorEntry]] = {}
    for entry in adapter:
        match = LORA_KEY.match(entry.name.removeprefix(PEFT_PREFIX))
        if match is None:
            problems.append(f"{entry.name}: not a LoRA weight (lora_A/lora_B)")
            continue
        modules.setdefault(match["module"], {})[match["which"]] = entry
    return modules


def _check_module(
    module: str, pair: dict[str, TensorEntry], config: LoraConfig, backbone: dict[str, TensorEntry]
) -> list[str]:
    base = backbone.get(f"{module}.weight")
    if base is None:
        return [f"{module}: no backbone tensor {module}.weight"]
    if len(base.shape) != 2:
        return [f"{module}: backbone weight has shape {list(base.shape)}, not 2-D"]
    if set(pair) != {"A", "B"}:
        return [f"{module}: needs both lora_A and lora_B, has only lora_{''.join(pair)}"]
    out_f, in_f = base.shape
    r = _rank_for(config, module)
    problems = []
    if tuple(pair["A"].shape) != (r, in_f):
        problems.append(f"{module}.lora_A: shape {list(pair['A'].shape)}, expected {[r, in_f]}")
    if tuple(pair["B"].shape) != (out_f, r):
        problems.append(f"{module}.lora_B: shape {list(pair['B'].shape)}, expected {[out_f, r]}")
    if not _targeted(config, module):
        problems.append(f"{module}: not among target_modules {config.target_modules}")
    return problems


def check_fit(config: LoraConfig, adapter: Manifest, backbone: Manifest) -> None:
    """Raise ``IncompatibleAdapterError`` listing every tensor that does not fit."""
    problems: list[str] = []
    modules = _group(adapter, problems)
    if not modules and not problems:
        problems.append("adapter has no LoRA tensors")
    by_name = backbone.by_name()
    for module, pair in sorted(modules.items()):
        problems.extend(_check_module(module, pair, config, by_name))
    if problems:
        count = len(problems)
        raise _problem(f"adapter does not fit the backbone ({count} problem(s))", problems)
