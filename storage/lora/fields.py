"""The fields of ``adapter_config.json`` besides the core ones: harmless, off, or unknown.

Follows peft 0.22's ``LoraConfig`` (see `storage.lora.config` for the rules). Every check
returns problems as strings that name the field; nothing is raised here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

CONFIG_FILE = "adapter_config.json"
CORE_FIELDS = frozenset(
    ("peft_type", "r", "lora_alpha", "target_modules", "use_rslora")
    + ("rank_pattern", "alpha_pattern")
)

# feature -> what it would change, for the refusal message; accepted only when off
OFF_FIELDS = {
    "use_dora": "DoRA rescales the base weight",
    "fan_in_fan_out": "base weights stored transposed",
    "modules_to_save": "full copies of other modules",
    "layers_to_transform": "a layer selection",
    "layers_pattern": "a layer selection",
    "lora_bias": "a LoRA bias term",
    "target_parameters": "LoRA on raw parameters",
    "exclude_modules": "excluded modules",
    "trainable_token_indices": "trained token embeddings",
    "megatron_config": "Megatron parallel layers",
    "loftq_config": "a LoftQ-quantised backbone",
    "corda_config": "CorDA rewrites the backbone",
    "astra_config": "Astra rewrites the backbone",
    "lora_ga_config": "LoRA-GA rewrites the backbone",
    "velora_config": "VeLoRA layers",
    "monteclora_config": "MonteCLoRA sampling",
    "kasa_config": "KaSA layers",
    "arrow_config": "Arrow routing",
    "alora_invocation_tokens": "activated LoRA",
    "use_qalora": "QALoRA pooling",
    "layer_replication": "replicated layers",
    "use_bdlora": "block-diagonal LoRA",
    "ensure_weight_tying": "tied adapter weights",
}
# init_lora_weights values that only pick a starting point; PiSSA, OLoRA, CorDA, LoftQ, ...
# rewrite the backbone's weights, so their adapters do not fit the registered backbone
SAFE_INITS: tuple[object, ...] = (True, False, "gaussian", "eva")


def say(message: str) -> str:
    return f"{CONFIG_FILE}: {message}"


def show(value: Any, limit: int = 60) -> str:
    """repr(value), cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def label(name: str) -> str:
    """A field name as shown in a message: bare when it is an identifier, else quoted."""
    return name if name.isidentifier() and name.isascii() else show(name)


def is_off(value: Any) -> bool:
    """null, false, zero or empty: how PEFT leaves a feature it does not use."""
    if value is None or value is False:
        return True
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value == 0
    return isinstance(value, str | list | dict) and len(value) == 0


def _opt_str(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _opt_object(value: Any) -> bool:
    return value is None or isinstance(value, dict)


def _bool(value: Any) -> bool:
    return isinstance(value, bool)


def _dropout(value: Any) -> bool:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return number and math.isfinite(value) and 0 <= value <= 1


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


# harmless field -> (check, what it must be)
HARMLESS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "task_type": (_opt_str, "a string or null"),
    "peft_version": (_opt_str, "a string or null"),
    "base_model_name_or_path": (_opt_str, "a string or null"),
    "revision": (_opt_str, "a string or null"),
    "megatron_core": (_opt_str, "a string or null"),
    "auto_mapping": (_opt_object, "an object or null"),
    "eva_config": (_opt_object, "an object or null"),
    "runtime_config": (_opt_object, "an object or null"),
    "inference_mode": (_bool, "true or false"),
    "lora_dropout": (_dropout, "a number in [0, 1]"),
    "qalora_group_size": (_positive_int, "a positive integer"),
}


def other_field_problems(obj: Mapping[str, Any]) -> list[str]:
    """Problems of every field that is not a core one, in file order."""
    problems = []
    for name, value in obj.items():
        problem = _field_problem(name, value)
        if problem is not None:
            problems.append(say(problem))
    return problems


def _field_problem(name: str, value: Any) -> str | None:
    if name in CORE_FIELDS:
        return None
    if name in HARMLESS:
        check, rule = HARMLESS[name]
        return None if check(value) else f"{name} must be {rule}, got {show(value)}"
    refused = f"{name}={show(value)} is not supported"
    if name == "init_lora_weights":
        if any(value is v or (isinstance(v, str) and value == v) for v in SAFE_INITS):
            return None
        return f"{refused} (only {list(SAFE_INITS)}; the others rewrite the backbone)"
    if name == "bias":
        return None if value == "none" else f"{refused} (trained bias terms)"
    if name in OFF_FIELDS:
        return None if is_off(value) else f"{refused} ({OFF_FIELDS[name]})"
    if is_off(value):
        return None
    return (
        f"unknown field {label(name)}={show(value)} is not supported "
        "(unknown fields must be null, false or empty)"
    )
