"""Static-merge baselines: several LoRA adapters folded into one PEFT adapter.

Adapters are read through `storage.lora`, the format owner the registry and the engines use,
so a merge refuses exactly what they refuse and computes each module's scale as they do
(`s = alpha / r`, `alpha / sqrt(r)` with rsLoRA, per module with rank/alpha patterns).

All methods work on each module's weight delta `dW_i = s_i * B_i @ A_i`, never on A and B
separately (peft's `linear` combination sums the A's and the B's, which
adds cross terms and is not a sum of deltas):

- `linear` (Full Additive): the exact sum `sum_i w_i dW_i`, written without loss by
  concatenating ranks: A = [A_1; A_2; ...], B = [w_1 s_1 B_1, w_2 s_2 B_2, ...], alpha = r.
- `ties` (Yadav et al. 2023, as in peft's merge_utils): trim each delta to its top `density`
  fraction by magnitude, elect each entry's sign from the sum of the trimmed deltas, average
  the weighted entries that agree with it (disjoint mean).
- `dare_ties`: like ties, but the trim is DARE's random drop (keep with probability
  `density`, rescale by 1/density), seeded.

The methods are one table, `METHODS` (name -> `MergeMethod`: what it is called in the paper,
which options it reads, the function that merges); the CLI offers its names, and any other
name is refused with the list. TSPA, the paper's fourth merge baseline, is not offered: its
algorithm could not be pinned down from public sources. A new method is one function
`(adapters, weights, spec) -> ({module: (A, B)}, rank)` and one row of the table.

ties / dare_ties deltas are generally not low-rank; they are written back as a LoRA through a
truncated SVD of rank `rank` (default: the sum of the input ranks, capped by the module's
dimensions; exact when the merged delta's rank fits). Every module of the output has one rank
(zero-padded where its inputs had less) and scale 1, so its config needs no patterns.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.progress import Steps, told
from storage.errors import AdapterFormatError, StorageError
from storage.lora import (
    CONFIG_FILE,
    MAX_CONFIG_BYTES,
    WEIGHTS_FILE,
    LoraConfig,
    ModulePattern,
    check_adapter,
    lora_key,
)
from storage.manifest import manifest_of_file
from trainers.adapter_dir import adapter_dir, check_empty
from trainers.errors import MergeError

MERGE_FILE = "merge.json"


@dataclass(frozen=True)
class LoraAdapter:
    """An adapter read from disk: its config and {module: (A, B, scale)} (float32)."""

    path: Path
    config: LoraConfig
    factors: dict[str, tuple[Any, Any, float]]

    def rank(self, module: str) -> int:
        return int(self.factors[module][0].shape[0])

    def delta(self, module: str) -> Any:
        a, b, scale = self.factors[module]
        return scale * (b @ a)


def read_adapter(path: str | os.PathLike[str]) -> LoraAdapter:
    """Read a PEFT adapter directory through `storage.lora` (the registry's and the engine's
    rules: per-module rank and scale from rank/alpha patterns and rsLoRA)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    try:
        with open(path / CONFIG_FILE, "rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
        layout = check_adapter(raw, manifest_of_file(path / WEIGHTS_FILE))
        tensors = load_file(path / WEIGHTS_FILE)
    except AdapterFormatError as exc:
        raise MergeError(f"{path}: {exc}") from exc
    except (OSError, StorageError, SafetensorError) as exc:
        raise MergeError(f"{path}: not a readable PEFT adapter directory ({exc})") from None
    factors = {
        m.name: (tensors[m.a].float(), tensors[m.b].float(), m.scale) for m in layout.modules
    }
    return LoraAdapter(path, layout.config, factors)


def _shapes(adapters: Sequence[LoraAdapter]) -> dict[str, tuple[int, int]]:
    """{module: (out, in)}, checked to agree across adapters."""
    shapes: dict[str, tuple[int, int]] = {}
    for ad in adapters:
        for m, (a, b, _) in ad.factors.items():
            shape = (int(b.shape[0]), int(a.shape[1]))
            if shapes.setdefault(m, shape) != shape:
                raise MergeError(f"{m}: shape {shape} in {ad.path} differs from {shapes[m]}")
    return shapes


def _summed_rank(adapters: Sequence[LoraAdapter], modules: Sequence[str]) -> int:
    """The largest sum of input ranks over the modules (concatenation's rank)."""
    return max(sum(ad.rank(m) for ad in adapters if m in ad.factors) for m in modules)


# -- the merges, on dense deltas ----------------------------------------------------------


def additive_factors(
    adapters: Sequence[LoraAdapter], module: str, weights: Sequence[float], rank: int
) -> tuple[Any, Any]:
    """(A, B) of rank `rank` with B @ A == sum_i w_i s_i B_i A_i exactly (scale 1):
    concatenated ranks, zero-padded to `rank`."""
    import torch

    a_blocks, b_blocks = [], []
    for ad, w in zip(adapters, weights, strict=True):
        if module in ad.factors:
            a, b, scale = ad.factors[module]
            a_blocks.append(a)
            b_blocks.append(w * scale * b)
    a, b = torch.cat(a_blocks, dim=0), torch.cat(b_blocks, dim=1)
    pad = rank - a.shape[0]
    return (
        torch.cat([a, torch.zeros(pad, a.shape[1])]),
        torch.cat([b, torch.zeros(b.shape[0], pad)], dim=1),
    )


def magnitude_trim(delta: Any, density: float) -> Any:
    """Keep the top `int(density * numel)` entries by magnitude."""
    import torch

    k = int(density * delta.numel())
    flat = delta.reshape(-1)
    keep = torch.zeros_like(flat)
    keep[torch.topk(flat.abs(), k=k).indices] = 1
    return (flat * keep).reshape(delta.shape)


def random_drop(delta: Any, density: float, generator: Any) -> Any:
    """DARE: keep each entry with probability `density`, rescaled by 1/density."""
    import torch

    keep = torch.bernoulli(torch.full(delta.shape, density), generator=generator)
    return delta * keep / density


def elect_and_merge(trimmed: Sequence[Any], weights: Sequence[float]) -> Any:
    """TIES sign election (sum of trimmed deltas, ties to +) and disjoint weighted mean."""
    import torch

    stack = torch.stack(list(trimmed))
    sign = torch.where(stack.sum(dim=0) >= 0, 1.0, -1.0)
    agree = stack.sign() == sign
    w = torch.tensor(list(weights), dtype=stack.dtype).view(-1, *([1] * (stack.dim() - 1)))
    total = (stack * w * agree).sum(dim=0)
    return total / agree.sum(dim=0).clamp(min=1)


def ties(deltas: Sequence[Any], weights: Sequence[float], density: float) -> Any:
    trimmed = deltas if density >= 1 else [magnitude_trim(d, density) for d in deltas]
    return elect_and_merge(trimmed, weights)


def dare_ties(
    deltas: Sequence[Any], weights: Sequence[float], density: float, generator: Any
) -> Any:
    dropped = deltas if density >= 1 else [random_drop(d, density, generator) for d in deltas]
    return elect_and_merge(dropped, weights)


def svd_factors(delta: Any, rank: int) -> tuple[Any, Any]:
    """(A, B) of rank `rank` with B @ A the best rank-`rank` approximation of `delta`."""
    import torch

    u, s, vh = torch.linalg.svd(delta.double(), full_matrices=False)
    r = min(rank, s.numel())
    b = (u[:, :r] * s[:r]).float()
    a = vh[:r].float()
    if r < rank:  # pad so every module has the adapter's one rank
        a = torch.cat([a, torch.zeros(rank - r, a.shape[1])])
        b = torch.cat([b, torch.zeros(b.shape[0], rank - r)], dim=1)
    return a.contiguous(), b.contiguous()


# -- adapters in, adapter out -------------------------------------------------------------


@dataclass(frozen=True)
class MergeSpec:
    method: str
    weights: tuple[float, ...] | None = None
    density: float = 0.5
    seed: int = 0
    rank: int | None = None

    def __post_init__(self) -> None:
        method_named(self.method)
        if not 0 < self.density <= 1:
            raise MergeError(f"density must be in (0, 1], got {self.density}")
        if self.rank is not None and self.rank < 1:
            raise MergeError(f"rank must be positive, got {self.rank}")


Factors = dict[str, tuple[Any, Any]]
MergeFunction = Callable[[Sequence[LoraAdapter], Sequence[float], "MergeSpec"], tuple[Factors, int]]


def merge_linear(
    adapters: Sequence[LoraAdapter], weights: Sequence[float], _spec: MergeSpec
) -> tuple[Factors, int]:
    """Full Additive: the exact weighted sum, ranks concatenated."""
    shapes = _shapes(adapters)
    summed = _summed_rank(adapters, list(shapes))
    return {m: additive_factors(adapters, m, weights, summed) for m in shapes}, summed


def merge_ties(
    adapters: Sequence[LoraAdapter], weights: Sequence[float], spec: MergeSpec
) -> tuple[Factors, int]:
    return _merge_dense(adapters, spec, lambda deltas, _g: ties(deltas, weights, spec.density))


def merge_dare_ties(
    adapters: Sequence[LoraAdapter], weights: Sequence[float], spec: MergeSpec
) -> tuple[Factors, int]:
    return _merge_dense(
        adapters, spec, lambda deltas, g: dare_ties(deltas, weights, spec.density, g)
    )


def _merge_dense(
    adapters: Sequence[LoraAdapter], spec: MergeSpec, combine: Callable[[list[Any], Any], Any]
) -> tuple[Factors, int]:
    """`combine(deltas, generator)` on each module's dense deltas, back to rank `spec.rank`
    (default: the summed input ranks) by SVD; one seeded generator for all modules, in
    sorted module order."""
    import torch

    shapes = _shapes(adapters)
    rank = spec.rank or _summed_rank(adapters, list(shapes))
    generator = torch.Generator().manual_seed(spec.seed)
    out = {}
    for m, shape in shapes.items():
        deltas = [ad.delta(m) if m in ad.factors else torch.zeros(shape) for ad in adapters]
        out[m] = svd_factors(combine(deltas, generator), rank)
    return out, rank


@dataclass(frozen=True)
class MergeMethod:
    """One row of the table: the method's name, what the paper calls it, the `MergeSpec`
    options it reads (besides weights), and the function that merges."""

    name: str
    title: str
    options: tuple[str, ...]
    merge: MergeFunction


METHODS: Mapping[str, MergeMethod] = {
    method.name: method
    for method in (
        MergeMethod("linear", "Full Additive", (), merge_linear),
        MergeMethod("ties", "TIES", ("density", "rank"), merge_ties),
        MergeMethod("dare_ties", "DARE-TIES", ("density", "seed", "rank"), merge_dare_ties),
    )
}


def method_named(name: str) -> MergeMethod:
    """The method called `name`; MergeError naming the offered ones otherwise."""
    try:
        return METHODS[name]
    except KeyError:
        raise MergeError(f"unknown merge method {name!r} (one of {', '.join(METHODS)})") from None


def merged_factors(adapters: Sequence[LoraAdapter], spec: MergeSpec) -> tuple[Factors, int]:
    """({module: (A, B)} at scale 1, rank) of the merge of `adapters`."""
    if not adapters:
        raise MergeError("nothing to merge")
    weights = list(spec.weights or [1.0] * len(adapters))
    if len(weights) != len(adapters):
        raise MergeError(f"{len(weights)} weights for {len(adapters)} adapters")
    return method_named(spec.method).merge(adapters, weights, spec)


def _config(adapters: Sequence[LoraAdapter], rank: int, modules: Sequence[str]) -> dict[str, Any]:
    """The merged adapter's config: one rank, scale 1, every input module targeted."""
    config = dict(adapters[0].config.fields)
    bases = {ad.config.fields.get("base_model_name_or_path") for ad in adapters}
    if len(bases) > 1:
        config["base_model_name_or_path"] = None
    config |= {"r": rank, "lora_alpha": rank, "target_modules": _targets(adapters, modules)}
    config |= {"use_rslora": False, "rank_pattern": {}, "alpha_pattern": {}}
    config["inference_mode"] = True
    return config


def _targets(adapters: Sequence[LoraAdapter], modules: Sequence[str]) -> list[str]:
    """The union of the inputs' target names; the module paths when one used a pattern."""
    configs = [ad.config for ad in adapters]
    if any(isinstance(c.target_modules, ModulePattern) for c in configs):
        return sorted(modules)
    return sorted({name for c in configs for name in c.target_list})


def merge_adapters(
    paths: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    spec: MergeSpec,
    *,
    steps: Steps | None = None,
) -> Path:
    """Merge the adapters at `paths` into a PEFT adapter directory `out`; `steps` hears of
    each adapter read, the merge and the write (silent when None)."""
    from safetensors.torch import save_file

    check_empty(out)
    label = f"merge {spec.method}"
    total = len(paths) + 2
    with told(steps, label, total) as step:
        adapters = []
        for p in paths:
            step(f"read {os.fspath(p)}")
            adapters.append(read_adapter(p))
        step(f"merge {len(adapters)} adapters")
        factors, rank = merged_factors(adapters, spec)
        step(f"write {os.fspath(out)}")
        tensors = {}
        for m, (a, b) in factors.items():
            tensors[lora_key(m, "A")], tensors[lora_key(m, "B")] = a.contiguous(), b.contiguous()
        with adapter_dir(out) as tmp:
            save_file(tensors, tmp / WEIGHTS_FILE, metadata={"format": "pt"})
            config = _config(adapters, rank, list(factors))
            (tmp / CONFIG_FILE).write_text(json.dumps(config, indent=2, sort_keys=True))
            record = {
                "method": spec.method,
                "inputs": [os.fspath(p) for p in paths],
                "weights": list(spec.weights or [1.0] * len(adapters)),
                "density": spec.density,
                "seed": spec.seed,
                "rank": rank,
            }
            (tmp / MERGE_FILE).write_text(json.dumps(record, indent=2) + "\n")
    return Path(out)
