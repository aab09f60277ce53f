"""The resident backbone's tensors under the names of its files (for the audit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime.errors import BackboneLoadError


def backbone_tensors(model: Any, backbone_dir: Path | None) -> dict[str, tuple[Any, str]]:
    """name -> (resident tensor, file dtype) under the names of the backbone's files."""
    from storage.manifest import read_header

    state = model.state_dict(keep_vars=True)
    if backbone_dir is None:  # a model passed in: its state dict, tied duplicates once
        seen: set[tuple[int, int]] = set()
        out = {}
        for name, t in state.items():
            key = (t.data_ptr(), t.numel())
            if key not in seen:
                seen.add(key)
                out[name] = (t, "")
        return out
    out, missing = {}, []
    for shard in sorted(backbone_dir.glob("*.safetensors")):
        for info in read_header(shard).tensors:
            if info.name in state:
                out[info.name] = (state[info.name], info.dtype)
            else:
                missing.append(info.name)
    if missing:
        raise BackboneLoadError(f"{backbone_dir}: file tensors not in the model: {missing[:5]}")
    return out
