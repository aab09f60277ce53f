"""Static-merge baselines: several LoRA adapters folded into one PEFT adapter.

All methods work on each module's weight delta `dW_i = s_i * B_i @ A_i` (s = alpha / r),
never on A and B separately (peft's `linear` combination sums the A's and the B's, which
adds cross terms and is not a sum of deltas):

- `linear` (Full Additive): the exact sum `sum_i w_i dW_i`, written without loss by
  concatenating ranks: A = [A_1; A_2; ...], B = [w_1 s_1 B_1, w_2 s_2 B_2, ...], alpha = r.
- `ties` (Yadav et al. 2023, as in peft's merge_utils): trim each delta to its top `density`
  fraction by magnitude, elect each entry's sign from the sum of the trimmed deltas, average
  the weighted entries that agree with it (disjoint mean).
- `dare_ties`: like ties, but the trim is DARE's random drop (keep with probability
  `density`, rescale by 1/density), seeded.
- `tspa`: TSPA ("Two-Stage Parameter Alignment for Multi-LoRA Merging", ACL 2026 Findings)
  could not be pinned down from public sources here; it raises UnsupportedMergeError.

ties / dare_ties deltas are generally not low-rank; they are written back as a LoRA through a
truncated SVD of rank `rank` (default: the sum of the input ranks, capped by the module's
dimensions; exact when the merged delta's rank fits).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainers.adapter_dir import adapter_dir, check_empty
from trainers.errors import MergeError, UnsupportedMergeError

METHODS = ("linear", "ties", "dare_ties", "tspa")
MERGE_FILE = "merge.json"
_A, _B = ".lora_A.weight", ".lora_B.weight"


@dataclass(frozen=True)
class LoraAdapter:
    """An adapter read from disk: config, scale and {module: (A, B)}."""

    path: Path
    config: dict[str, Any]
    scale: float
    factors: dict[str, tuple[Any, Any]]

    @property
    def rank(self) -> int:
        return int(self.config["r"])

    def delta(self, module: str) -> Any:
        a, b = self.factors[module]
        return self.scale * (b @ a)


def read_adapter(path: str | os.PathLike[str]) -> LoraAdapter:
    from safetensors.torch import load_file

    path = Path(path)
    try:
        config = json.loads((path / "adapter_config.json").read_text())
        tensors = load_file(path / "adapter_model.safetensors")
    except (OSError, ValueError) as exc:
        raise MergeError(f"{path}: not a readable PEFT adapter directory ({exc})") from None
    if config.get("rank_pattern") or config.get("alpha_pattern") or config.get("use_dora"):
        raise MergeError(f"{path}: rank/alpha patterns and DoRA are not supported by the merges")
    r, alpha = int(config["r"]), float(config["lora_alpha"])
    scale = alpha / r**0.5 if config.get("use_rslora") else alpha / r
    modules = sorted(k.removesuffix(_A) for k in tensors if k.endswith(_A))
    factors = {}
    for m in modules:
        if m + _B not in tensors:
            raise MergeError(f"{path}: {m} has lora_A but no lora_B")
        factors[m] = (tensors[m + _A].float(), tensors[m + _B].float())
    if not factors:
        raise MergeError(f"{path}: no LoRA tensors")
    return LoraAdapter(path, config, scale, factors)


def _shapes(adapters: Sequence[LoraAdapter]) -> dict[str, tuple[int, int]]:
    """{module: (out, in)}, checked to agree across adapters."""
    shapes: dict[str, tuple[int, int]] = {}
    for ad in adapters:
        for m, (a, b) in ad.factors.items():
            shape = (int(b.shape[0]), int(a.shape[1]))
            if shapes.setdefault(m, shape) != shape:
                raise MergeError(f"{m}: shape {shape} in {ad.path} differs from {shapes[m]}")
    return shapes


# -- the merges, on dense deltas ----------------------------------------------------------


def additive_factors(
    adapters: Sequence[LoraAdapter], module: str, weights: Sequence[float], shape: tuple[int, int]
) -> tuple[Any, Any]:
    """(A, B) with B @ A == sum_i w_i s_i B_i A_i exactly (scale 1): concatenated ranks."""
    import torch

    out_f, in_f = shape
    a_blocks, b_blocks = [], []
    for ad, w in zip(adapters, weights, strict=True):
        if module in ad.factors:
            a, b = ad.factors[module]
        else:
            a, b = torch.zeros(ad.rank, in_f), torch.zeros(out_f, ad.rank)
        a_blocks.append(a)
        b_blocks.append(w * ad.scale * b)
    return torch.cat(a_blocks, dim=0), torch.cat(b_blocks, dim=1)


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
        if self.method not in METHODS:
            raise MergeError(f"unknown merge method {self.method!r} (one of {', '.join(METHODS)})")
        if self.method == "tspa":
            raise UnsupportedMergeError(
                "TSPA (Two-Stage Parameter Alignment for Multi-LoRA Merging, ACL 2026 Findings) "
                "is not implemented: its algorithm could not be pinned down from public sources"
            )
        if not 0 < self.density <= 1:
            raise MergeError(f"density must be in (0, 1], got {self.density}")
        if self.rank is not None and self.rank < 1:
            raise MergeError(f"rank must be positive, got {self.rank}")


def merged_factors(
    adapters: Sequence[LoraAdapter], spec: MergeSpec
) -> tuple[dict[str, tuple[Any, Any]], int]:
    """({module: (A, B)} at scale 1, rank) of the merge of `adapters`."""
    import torch

    if not adapters:
        raise MergeError("nothing to merge")
    weights = list(spec.weights or [1.0] * len(adapters))
    if len(weights) != len(adapters):
        raise MergeError(f"{len(weights)} weights for {len(adapters)} adapters")
    shapes = _shapes(adapters)
    if spec.method == "linear":
        rank = sum(ad.rank for ad in adapters)
        return {m: additive_factors(adapters, m, weights, s) for m, s in shapes.items()}, rank
    rank = spec.rank or sum(ad.rank for ad in adapters)
    generator = torch.Generator().manual_seed(spec.seed)
    out = {}
    for m, shape in shapes.items():
        deltas = [ad.delta(m) if m in ad.factors else torch.zeros(shape) for ad in adapters]
        if spec.method == "ties":
            merged = ties(deltas, weights, spec.density)
        else:
            merged = dare_ties(deltas, weights, spec.density, generator)
        out[m] = svd_factors(merged, rank)
    return out, rank


def _config(adapters: Sequence[LoraAdapter], rank: int, modules: Sequence[str]) -> dict[str, Any]:
    config = dict(adapters[0].config)
    targets = sorted({t for ad in adapters for t in _targets(ad.config)})
    bases = {ad.config.get("base_model_name_or_path") for ad in adapters}
    if len(bases) > 1:
        config["base_model_name_or_path"] = None
    config |= {"r": rank, "lora_alpha": rank, "target_modules": targets, "use_rslora": False}
    config |= {"rank_pattern": {}, "alpha_pattern": {}, "inference_mode": True}
    return config


def _targets(config: dict[str, Any]) -> list[str]:
    targets = config.get("target_modules") or []
    if isinstance(targets, str):
        raise MergeError(f"target_modules given as a regex ({targets!r}) is not supported")
    return list(targets)


def merge_adapters(
    paths: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], spec: MergeSpec
) -> Path:
    """Merge the adapters at `paths` into a PEFT adapter directory `out`."""
    from safetensors.torch import save_file

    check_empty(out)
    adapters = [read_adapter(p) for p in paths]
    factors, rank = merged_factors(adapters, spec)
    tensors = {}
    for m, (a, b) in factors.items():
        tensors[m + _A], tensors[m + _B] = a.contiguous(), b.contiguous()
    with adapter_dir(out) as tmp:
        save_file(tensors, tmp / "adapter_model.safetensors", metadata={"format": "pt"})
        config = _config(adapters, rank, list(factors))
        (tmp / "adapter_config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
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
