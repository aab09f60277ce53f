"""PEFT LoRA directories checked against a backbone without torch, by `storage.lora`.

`check_adapter_dir` reads ``adapter_config.json`` and the manifest of
``adapter_model.safetensors`` (its tensors hashed, for an engine that does not load them
itself) and hands both to `storage.lora.check_adapter`, the one owner of the adapter format
(the registry's fit check gives the same messages). Problems are appended to the caller's
list, never raised, so that a whole batch of adapters is validated at once.
`check_adapter_layout` and `adapter_rank` read the config and the safetensors header only,
hashing nothing: the reference engine hashes the tensors it has loaded, once.
The reference engine checks against its ``nn.Linear`` shapes; the vLLM engine, which keeps
the backbone in a worker process, against the backbone's safetensors headers
(`backbone_shapes`), and against its ``max_lora_rank`` (`adapter_problems`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from storage.errors import AdapterFormatError, StorageError
from storage.lora import CONFIG_FILE, MAX_CONFIG_BYTES, WEIGHTS_FILE, AdapterLayout, check_adapter
from storage.lora.adapter import Tensor
from storage.manifest import manifest_of_file, read_header, safetensors_files

__all__ = [
    "CONFIG_FILE",
    "WEIGHTS_FILE",
    "adapter_problems",
    "adapter_rank",
    "backbone_shapes",
    "check_adapter_dir",
    "check_adapter_layout",
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
    config = _read_config(path, problems)
    manifest = None
    try:
        manifest = manifest_of_file(path / WEIGHTS_FILE)
    except (OSError, StorageError) as exc:
        problems.append(f"{WEIGHTS_FILE}: {exc}")
    if manifest is None:
        return None, ""
    return _layout(config, manifest, shapes, problems), manifest.root


def check_adapter_layout(
    path: Path, shapes: Shapes | None, problems: list[str]
) -> AdapterLayout | None:
    """The adapter's layout, checked from its config and safetensors header: no tensor is
    read or hashed (an engine that loads the tensors hashes what it loaded)."""
    config = _read_config(path, problems)
    try:
        tensors = read_header(path / WEIGHTS_FILE).tensors
    except (OSError, StorageError) as exc:
        problems.append(f"{WEIGHTS_FILE}: {exc}")
        return None
    return _layout(config, tensors, shapes, problems)


def adapter_rank(path: Path) -> int:
    """The largest rank of the adapter's modules (0 when it does not check out), from its
    config and safetensors header: no tensor is read."""
    layout = check_adapter_layout(path, None, [])
    return max((m.rank for m in layout.modules), default=0) if layout is not None else 0


def adapter_problems(path: Path, backbone: Shapes, max_rank: int) -> tuple[list[str], str]:
    """Everything that keeps the adapter at `path` from being served on `backbone` by an
    engine whose LoRA slots hold ranks up to `max_rank`, and its weights manifest root ("" when
    the weights do not read)."""
    problems: list[str] = []
    layout, root = check_adapter_dir(path, backbone, problems)
    if layout is not None:
        over = [m for m in layout.modules if m.rank > max_rank]
        if over:  # one line for the adapter, not one per module (a merge has hundreds)
            names = ", ".join(m.name for m in over[:3]) + (", ..." if len(over) > 3 else "")
            problems.append(
                f"rank {max(m.rank for m in over)} exceeds the engine's max_lora_rank "
                f"{max_rank} in {len(over)} of {len(layout.modules)} modules ({names})"
            )
    return problems, root


def _read_config(path: Path, problems: list[str]) -> bytes | None:
    try:
        with open(path / CONFIG_FILE, "rb") as fh:
            return fh.read(MAX_CONFIG_BYTES + 1)  # the format check refuses a larger one
    except OSError as exc:
        problems.append(f"{CONFIG_FILE}: {exc}")
        return None


def _layout(
    config: bytes | None, tensors: Iterable[Tensor], shapes: Shapes | None, problems: list[str]
) -> AdapterLayout | None:
    if config is None:
        return None
    try:
        return check_adapter(config, tensors, shapes)
    except AdapterFormatError as exc:
        problems.extend(exc.problems)
        return None
