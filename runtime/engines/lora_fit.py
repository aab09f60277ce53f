"""PEFT LoRA directories checked against a backbone without torch, by `storage.lora`.

`check_adapter_dir` reads ``adapter_config.json`` and the manifest of
``adapter_model.safetensors`` and hands both to `storage.lora.check_adapter`, the one owner of
the adapter format (the registry's fit check gives the same messages). Problems are appended
to the caller's list, never raised, so that a whole batch of adapters is validated at once.
The reference engine checks against its ``nn.Linear`` shapes; the vLLM engine, which keeps
the backbone in a worker process, against the backbone's safetensors headers
(`backbone_shapes`), and against its ``max_lora_rank`` (`adapter_problems`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from storage.errors import AdapterFormatError, StorageError
from storage.lora import CONFIG_FILE, MAX_CONFIG_BYTES, WEIGHTS_FILE, AdapterLayout, check_adapter
from storage.manifest import manifest_of_file, read_header, safetensors_files

__all__ = [
    "CONFIG_FILE",
    "WEIGHTS_FILE",
    "adapter_problems",
    "adapter_rank",
    "backbone_shapes",
    "check_adapter_dir",
]

Shapes = Mapping[str, tuple[int, ...]]


def backbone_shapes(backbone_dir: Path) -> dict[str, tuple[int, ...]]:
    """tensor name -> shape over every `*.safetensors` shard of the backbone directory."""
    shapes: dict[str, tuple[int, ...]] = {}
    for shard in safetensors_files(backbone_dir):
        for info in read_header(shard).tensors:
            shapes[info.name] = tuple(info.shape)
    return shapes


def check_adapter_dir(
    path: Path, shapes: Shapes | None, problems: list[str]
) -> tuple[AdapterLayout | None, str]:
    """(layout, weights manifest root) of the adapter at `path`; every problem appended.

    Without `shapes` only the adapter itself is checked (its base shapes are implied)."""
    config = manifest = None
    try:
        with open(path / CONFIG_FILE, "rb") as fh:
            config = fh.read(MAX_CONFIG_BYTES + 1)  # the format check refuses a larger one
    except OSError as exc:
        problems.append(f"{CONFIG_FILE}: {exc}")
    try:
        manifest = manifest_of_file(path / WEIGHTS_FILE)
    except (OSError, StorageError) as exc:
        problems.append(f"{WEIGHTS_FILE}: {exc}")
    root = manifest.root if manifest is not None else ""
    if config is None or manifest is None:
        return None, root
    try:
        return check_adapter(config, manifest, shapes), root
    except AdapterFormatError as exc:
        problems.extend(exc.problems)
        return None, root


def adapter_rank(path: Path) -> int:
    """The largest rank of the adapter's modules (0 when it does not check out)."""
    layout, _ = check_adapter_dir(path, None, [])
    return max((m.rank for m in layout.modules), default=0) if layout is not None else 0


def adapter_problems(path: Path, backbone: Shapes, max_rank: int) -> list[str]:
    """Everything that keeps the adapter at `path` from being served on `backbone` by an
    engine whose LoRA slots hold ranks up to `max_rank`."""
    problems: list[str] = []
    layout, _ = check_adapter_dir(path, backbone, problems)
    if layout is not None:
        problems.extend(
            f"{m.name}: rank {m.rank} exceeds the engine's max_lora_rank {max_rank}"
            for m in layout.modules
            if m.rank > max_rank
        )
    return problems
