"""Manifest roots of weights in memory: the proof that frozen weights stayed frozen.

Roots are computed by the runtime audit (`runtime.audit.manifest_of_resident`) over raw bytes,
so they are the same identity as a manifest of the files. The backbone is named as in its
own state dict (a PEFT wrapper's `.base_layer` and `lora_*` entries are undone), each adapter
as PEFT saves it (`get_peft_model_state_dict`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from runtime.audit import manifest_of_resident

_LORA_KEY = re.compile(r"\.lora_(A|B|embedding_A|embedding_B|magnitude_vector)\.")


def root_of(tensors: Mapping[str, Any]) -> str:
    """Manifest root of named in-memory tensors (the runtime audit's identity)."""
    return manifest_of_resident(tensors).root


def backbone_tensors(model: Any) -> dict[str, Any]:
    """The base model's tensors under their own names, whether or not PEFT wraps it."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    out = {}
    for name, tensor in base.state_dict(keep_vars=True).items():
        if _LORA_KEY.search(name):
            continue
        out[name.replace(".base_layer.", ".")] = tensor
    return out


def adapter_tensors(peft_model: Any, adapter: str) -> dict[str, Any]:
    """One adapter's tensors, keyed as in its `adapter_model.safetensors`."""
    from peft import get_peft_model_state_dict

    return dict(get_peft_model_state_dict(peft_model, adapter_name=adapter))


def resident_roots(peft_model: Any, adapters: list[str]) -> dict[str, str]:
    """{"backbone": root, adapter: root, ...} of what is in memory now."""
    roots = {"backbone": root_of(backbone_tensors(peft_model))}
    for name in adapters:
        roots[f"adapter:{name}"] = root_of(adapter_tensors(peft_model, name))
    return roots


def changed_roots(
    before: Mapping[str, str], after: Mapping[str, str]
) -> dict[str, tuple[str, str]]:
    return {k: (v, after.get(k, "<missing>")) for k, v in before.items() if after.get(k) != v}
