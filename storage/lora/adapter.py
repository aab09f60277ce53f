"""The tensors of a PEFT LoRA adapter: A/B pairs by name, and the fit against a backbone.

PEFT saves ``base_model.model.<module>.lora_A.weight`` of shape ``[r, in_features]`` and
``base_model.model.<module>.lora_B.weight`` of shape ``[out_features, r]`` for a backbone
``nn.Linear`` whose weight ``<module>.weight`` has shape ``[out_features, in_features]``; ``r``
is the module's rank (``rank_pattern`` or ``r``). Its forward adds ``scale * B @ A @ x`` with
``scale = alpha / r`` (``alpha / sqrt(r)`` with rsLoRA), alpha from ``alpha_pattern`` or
``lora_alpha``.

A backbone is given as tensor name -> shape. The registry builds it from the backbone's
manifest; the runtime from the model's ``nn.Linear`` modules (``<module>.weight`` ->
``(out, in)``). Without a backbone (the merges) each module's ``(out, in)`` is read off its
own tensors, so everything but the backbone fit is checked.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from storage.errors import AdapterFormatError
from storage.header import TensorInfo
from storage.lora.config import LoraConfig, capped, read_config
from storage.lora.fields import show
from storage.manifest import TensorEntry

PEFT_PREFIX = "base_model.model."
WEIGHTS_FILE = "adapter_model.safetensors"
FLOAT_DTYPES = frozenset({"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"})
MAX_PROBLEMS = 100
KEY_FORM = "base_model.model.<module>.lora_A.weight or .lora_B.weight"
_SUFFIXES = {"A": ".lora_A.weight", "B": ".lora_B.weight"}
_NAME_CHARS = frozenset(string.ascii_letters + string.digits + "_-")

Shapes = Mapping[str, Sequence[int]]
# a manifest's entries, or a safetensors header's (the fit needs names, dtypes and shapes)
Tensor = TensorEntry | TensorInfo


@dataclass(frozen=True)
class LoraModule:
    """One adapted module: its tensors' names, rank, alpha, scale and base shape."""

    name: str
    a: str
    b: str
    rank: int
    alpha: float
    scale: float
    out_features: int
    in_features: int


@dataclass(frozen=True)
class AdapterLayout:
    """A checked adapter: its config and every module it adapts, sorted by name."""

    config: LoraConfig
    modules: tuple[LoraModule, ...]


def lora_key(module: str, which: str) -> str:
    """The PEFT tensor name of `module`'s lora_A ("A") or lora_B ("B") weight."""
    return f"{PEFT_PREFIX}{module}{_SUFFIXES[which]}"


def split_key(name: str) -> tuple[str, str] | None:
    """`base_model.model.<module>.lora_A.weight` -> (module, "A"); None for anything else."""
    if not name.startswith(PEFT_PREFIX):
        return None
    for which, suffix in _SUFFIXES.items():
        if name.endswith(suffix):
            module = name[len(PEFT_PREFIX) : -len(suffix)]
            return (module, which) if is_module_name(module) else None
    return None


def is_module_name(module: str) -> bool:
    """Dotted segments of letters, digits, '_' and '-' (what torch's module paths are)."""
    segments = module.split(".")
    return all(seg and set(seg) <= _NAME_CHARS for seg in segments)


def backbone_shapes(tensors: Iterable[TensorEntry]) -> dict[str, tuple[int, ...]]:
    """name -> shape of every backbone tensor (a manifest), for `check_adapter`."""
    return {t.name: tuple(t.shape) for t in tensors}


def check_adapter(
    config: bytes | str, tensors: Iterable[Tensor], backbone: Shapes | None = None
) -> AdapterLayout:
    """The layout of a PEFT LoRA adapter that fits `backbone`, or AdapterFormatError.

    `config` is the bytes of ``adapter_config.json``, `tensors` the entries of
    ``adapter_model.safetensors`` (its manifest, or its header: nothing here needs the
    digests). Every problem of the config, the tensor names and the fit is collected before
    raising.
    """
    parsed, problems = read_config(config)
    halves = _halves(tensors, problems)
    modules = []
    for name, half in sorted(halves.items()):
        module = _fit(name, half, parsed, backbone, problems)
        if module is not None:
            modules.append(module)
    if problems or parsed is None:
        raise AdapterFormatError(capped(problems, MAX_PROBLEMS))
    return AdapterLayout(parsed, tuple(modules))


def _halves(tensors: Iterable[Tensor], problems: list[str]) -> dict[str, dict[str, Tensor]]:
    halves: dict[str, dict[str, Tensor]] = {}
    count = 0
    for tensor in tensors:
        count += 1
        split = split_key(tensor.name)
        if split is None:
            problems.append(f"{show(tensor.name, 200)}: not a LoRA weight ({KEY_FORM})")
        elif tensor.dtype not in FLOAT_DTYPES:
            problems.append(f"{tensor.name}: dtype {tensor.dtype} is not floating point")
        elif len(tensor.shape) != 2:
            problems.append(f"{tensor.name}: shape {list(tensor.shape)} is not 2-D")
        else:
            halves.setdefault(split[0], {})[split[1]] = tensor
    if count == 0:
        problems.append(f"{WEIGHTS_FILE}: no LoRA tensors")
    return halves


def _fit(
    name: str,
    half: Mapping[str, Tensor],
    config: LoraConfig | None,
    backbone: Shapes | None,
    problems: list[str],
) -> LoraModule | None:
    if set(half) != {"A", "B"}:
        only = "".join(sorted(half))
        problems.append(f"{name}: lora_A and lora_B must both be present (found only lora_{only})")
        return None
    a, b = half["A"], half["B"]
    base = (b.shape[0], a.shape[1]) if backbone is None else backbone.get(f"{name}.weight")
    if base is None or len(base) != 2:
        problems.append(
            f"{name}: no nn.Linear in the backbone (no backbone tensor {name}.weight "
            "of shape [out, in])"
        )
        return None
    if config is None:
        return None
    before = len(problems)
    out_f, in_f = int(base[0]), int(base[1])
    if not config.targets(name):
        problems.append(f"{name}: not among target_modules {show(config.target_list)}")
    rank = config.rank_for(name)
    for which, tensor, expected in (("A", a, [rank, in_f]), ("B", b, [out_f, rank])):
        if list(tensor.shape) != expected:
            problems.append(
                f"{name}.lora_{which}: shape {list(tensor.shape)} and backbone weight "
                f"{[out_f, in_f]} do not fit: expected {expected} (rank {rank})"
            )
    if len(problems) > before:
        return None
    alpha = config.alpha_for(name)
    return LoraModule(name, a.name, b.name, rank, alpha, config.scale(rank, alpha), out_f, in_f)
