"""Manifest roots of weights in memory: the proof that frozen weights stayed frozen.

Roots are computed with `storage.manifest.manifest_of_tensors` over the tensors' raw bytes,
so they are the same identity as a manifest of the files. The backbone is named as in its
own state dict (a PEFT wrapper's `.base_layer` and `lora_*` entries are undone), each adapter
as PEFT saves it (`get_peft_model_state_dict`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from storage.manifest import manifest_of_tensors

_DTYPES = {
    "float64": "F64",
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "int64": "I64",
    "int32": "I32",
    "int16": "I16",
    "int8": "I8",
    "uint8": "U8",
    "bool": "BOOL",
}
_LORA_KEY = re.compile(r"\.lora_(A|B|embedding_A|embedding_B|magnitude_vector)\.")


def _items(tensors: Mapping[str, Any]) -> Iterator[tuple[str, str, tuple[int, ...], memoryview]]:
    import torch

    for name, tensor in tensors.items():
        t = tensor.detach().cpu().contiguous().reshape(-1)
        dtype = _DTYPES[str(tensor.dtype).removeprefix("torch.")]
        yield name, dtype, tuple(tensor.shape), memoryview(t.view(torch.uint8).numpy())


def root_of(tensors: Mapping[str, Any]) -> str:
    """Manifest root of named in-memory tensors."""
    return manifest_of_tensors(_items(tensors)).root


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
