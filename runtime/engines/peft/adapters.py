"""PEFT adapter directories read for the engine: checked by `storage.lora`, loaded by torch.

A directory holds ``adapter_config.json`` and ``adapter_model.safetensors`` (keys
``base_model.model.<module>.lora_A.weight``). The format module checks the config, the tensor
names, dtypes and shapes against the backbone's ``nn.Linear`` modules and gives each module's
rank and scale (rank/alpha patterns, rsLoRA), with the registry's messages; torch loads the
tensor data, read once and hashed once (the manifest root of what is resident). Problems are
appended to the caller's list, never raised, so that a batch of adapters is validated as a
whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.audit import manifest_of_resident
from runtime.engine import AdapterSpec
from runtime.engines.lora_fit import CONFIG_FILE, WEIGHTS_FILE, check_adapter_layout
from runtime.errors import RuntimeEngineError
from storage.errors import StorageError
from storage.lora import AdapterLayout

__all__ = ["CONFIG_FILE", "WEIGHTS_FILE", "LoadedAdapter", "linear_shapes", "read_adapter"]


@dataclass(frozen=True)
class LoadedAdapter:
    """An adapter read and validated against the backbone, not yet applied."""

    spec: AdapterSpec
    rank: int
    alpha: float
    file_root: str
    tensors: dict[str, Any]  # PEFT name -> original tensor, as stored in the file
    modules: dict[str, tuple[Any, Any, float]]  # module path -> (A, B, scale) for forward


def weight_key(spec: AdapterSpec) -> str:
    """What the LoRA layers know an adapter by: its version name, else its name."""
    return spec.version or spec.name


def linear_shapes(modules: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """The backbone as the format check sees it: ``<module>.weight`` -> (out, in) per
    ``nn.Linear`` (the only modules the LoRA hook can adapt)."""
    import torch

    return {
        f"{name}.weight": (module.out_features, module.in_features)
        for name, module in modules.items()
        if isinstance(module, torch.nn.Linear)
    }


def read_adapter(
    spec: AdapterSpec, model: Any, shapes: Mapping[str, tuple[int, int]], problems: list[str]
) -> LoadedAdapter | None:
    """Read and validate one PEFT adapter directory; problems are appended, not raised.

    The format is checked from the config and the safetensors header first (nothing hashed);
    then the tensors are loaded once and the manifest root is computed from the loaded bytes,
    the one hashing of the adapter at load. So the root compared with the registry's is that
    of exactly what becomes resident, whatever happened to the file since it was installed.
    """
    path = Path(spec.path)
    local: list[str] = []
    layout = check_adapter_layout(path, shapes, local)
    tensors = _load(path, local) if layout is not None and not local else {}
    root = _loaded_root(tensors, layout, local) if layout is not None and tensors else ""
    if root and spec.manifest_root is not None and root != spec.manifest_root:
        local.append(f"manifest root {root} != expected {spec.manifest_root}")
    problems.extend(f"adapter {spec.name!r} ({path}): {p}" for p in local)
    if local or layout is None:
        return None
    dtype, device = model.dtype, model.device
    modules = {
        m.name: (
            tensors[m.a].to(device=device, dtype=dtype),
            tensors[m.b].to(device=device, dtype=dtype),
            m.scale,
        )
        for m in layout.modules
    }
    config = layout.config
    return LoadedAdapter(spec, config.r, config.alpha, root, tensors, modules)


def _loaded_root(tensors: Mapping[str, Any], layout: AdapterLayout, problems: list[str]) -> str:
    """The manifest root of the loaded tensors, which must be those the header promised."""
    want = {m.a: (m.rank, m.in_features) for m in layout.modules}
    want |= {m.b: (m.out_features, m.rank) for m in layout.modules}
    if {name: tuple(t.shape) for name, t in tensors.items()} != want:
        problems.append(f"{WEIGHTS_FILE}: changed on disk while it was loaded")
        return ""
    try:
        return manifest_of_resident(tensors).root
    except (RuntimeEngineError, StorageError) as exc:
        problems.append(f"{WEIGHTS_FILE}: {exc}")
        return ""


def _load(path: Path, problems: list[str]) -> dict[str, Any]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return dict(load_file(path / WEIGHTS_FILE))
    except (OSError, SafetensorError) as exc:  # changed on disk since the header was read
        problems.append(f"{WEIGHTS_FILE}: {exc}")
        return {}
