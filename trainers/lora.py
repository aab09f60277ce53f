"""Train one capability's LoRA over the frozen backbone, next to frozen adapters.

Only the adapter being trained has trainable parameters; the backbone and every other
adapter loaded in the process have `requires_grad=False` and never take part in the
backward pass (only the trained adapter is active). Each optimizer step takes the mean loss
of a batch of `settings.batch` samples (one by default); under torchrun or accelerate launch
the batch is split across the ranks and DDP averages the gradients (`trainers.distributed`),
and rank 0 alone verifies and writes the adapter. Before anything is written, the manifest
roots of the backbone and of every other adapter are recomputed from memory and compared with
the roots taken before training (the backbone's before PEFT wraps it, since
`get_peft_model` mutates the model in place); any change raises `RootChangedError` and no
adapter is saved. Deterministic on CPU for a given seed.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from storage.manifest import manifest_of_path
from trainers.adapter_dir import adapter_dir, check_empty
from trainers.card import CARD_FILE, model_card
from trainers.distributed import SINGLE, World, gathered, global_sum, on_main, session, wrap_model
from trainers.errors import AdapterSpecError, NoSamplesError, RootChangedError
from trainers.loss import masked_nll, rows
from trainers.phases import PhaseSample
from trainers.roots import backbone_tensors, changed_roots, resident_roots, root_of

logger = logging.getLogger(__name__)

TRAINING_FILE = "training.json"
# The attention projections of llama-family backbones (q/k/v/o), the usual LoRA targets;
# `weact train --targets` picks others.
DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
DTYPES = ("float32", "bfloat16")
StepCallback = Callable[[int, int, float], None]
"""Called after each optimizer step with (step, total steps, loss)."""
Hook = Callable[[Any], None]


@dataclass(frozen=True)
class LoraSettings:
    rank: int = 8
    alpha: int = 16
    targets: tuple[str, ...] = DEFAULT_TARGETS
    lr: float = 1e-3
    epochs: int = 1
    seed: int = 0
    dropout: float = 0.0
    # Samples per optimizer step (the global batch, over every rank of a distributed job):
    # the step's loss is the mean of the samples' per-token-mean losses.
    batch: int = 1
    # The frozen backbone's dtype while training; the LoRA weights and their updates stay
    # fp32 (peft keeps adapter weights in fp32 on a bf16 base). Half the backbone's memory;
    # not faster on this project's CPUs at rank 8 on q/k/v/o (make reproduce: 2.4-5.2 s per
    # sample in fp32, 3.2-4.7 s in bf16).
    dtype: str = "float32"
    # Steps of `batch` whole trajectories (every phase sample of each, the step's loss the mean
    # of the samples' per-token means) instead of `batch` samples, each trajectory one forward
    # over its longest sample (the others are its prefixes: `trainers.loss.rows`): the shared
    # baseline on ~2.5x fewer tokens, in fewer and larger steps. Not with `sequential`.
    per_trajectory: bool = False

    def __post_init__(self) -> None:
        if self.rank < 1 or self.epochs < 1 or self.batch < 1 or self.lr <= 0 or not self.targets:
            raise ValueError(f"bad LoRA settings: {self}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {self.dtype!r}")


@dataclass
class TrainResult:
    adapter: str
    out: Path
    losses: list[float]
    roots: dict[str, str]
    covered: list[str]
    settings: LoraSettings
    extra: dict[str, Any] = field(default_factory=dict)


def load_backbone(path: str | os.PathLike[str], dtype: str = "float32") -> Any:
    """On CPU, every parameter frozen; fp32 unless `dtype` says otherwise."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
    model.requires_grad_(False)
    return model


def _lora_config(settings: LoraSettings) -> Any:
    from peft import LoraConfig

    return LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        target_modules=list(settings.targets),
        lora_dropout=settings.dropout,
        task_type="CAUSAL_LM",
    )


def wrap(model: Any, name: str, settings: LoraSettings, init: Path | None) -> Any:
    """A PeftModel whose adapter `name` is new (seeded) or a copy of the adapter at `init`."""
    import torch
    from peft import PeftModel, get_peft_model

    torch.manual_seed(settings.seed)
    if init is not None:
        return PeftModel.from_pretrained(model, init, adapter_name=name, is_trainable=True)
    return get_peft_model(model, _lora_config(settings), adapter_name=name)


def check_frozen(adapters: Mapping[str, Path], trained: str) -> None:
    for name, path in adapters.items():
        if name == trained:
            raise AdapterSpecError(f"adapter {name!r} is the one being trained; use --init")
        for file in ("adapter_config.json", "adapter_model.safetensors"):
            if not (Path(path) / file).is_file():
                raise AdapterSpecError(f"adapter {name!r}: {path} has no {file}")


def load_frozen(peft_model: Any, adapters: Mapping[str, Path]) -> None:
    for name, path in adapters.items():
        peft_model.load_adapter(str(path), adapter_name=name, is_trainable=False)


def freeze_all_but(peft_model: Any, trained: str) -> list[Any]:
    """requires_grad only on `trained`'s LoRA parameters; returns them."""
    peft_model.set_adapter(trained)
    params = []
    for name, p in peft_model.named_parameters():
        mine = ".lora_" in name and name.endswith(f".{trained}.weight")
        p.requires_grad_(mine)
        if mine:
            params.append(p)
    if not params:
        raise AdapterSpecError(f"adapter {trained!r} has no LoRA parameters to train")
    return params


def _groups(
    samples: Sequence[PhaseSample], epochs: int, seed: int, sequential: Sequence[str] | None
) -> list[list[PhaseSample]]:
    rng = random.Random(seed)
    groups = [list(samples)]
    if sequential:
        groups = [[s for s in samples if s.capability == cap] for cap in sequential]
    orders: list[list[PhaseSample]] = []
    for group in groups:
        order: list[PhaseSample] = []
        for _ in range(epochs):
            epoch = list(group)
            rng.shuffle(epoch)
            order += epoch
        orders.append(order)
    return orders


def schedule(
    samples: Sequence[PhaseSample], epochs: int, seed: int, sequential: Sequence[str] | None
) -> list[PhaseSample]:
    """Shuffled per epoch; `sequential` trains one capability's samples after another."""
    return [s for order in _groups(samples, epochs, seed, sequential) for s in order]


def trajectory_groups(
    samples: Sequence[PhaseSample], epochs: int, seed: int
) -> list[list[PhaseSample]]:
    """Per epoch the trajectories shuffled: one list of samples per trajectory and epoch."""
    rng = random.Random(seed)
    groups: dict[str, list[PhaseSample]] = {}
    for s in samples:
        groups.setdefault(s.trajectory, []).append(s)
    out: list[list[PhaseSample]] = []
    for _ in range(epochs):
        names = list(groups)
        rng.shuffle(names)
        out += [groups[name] for name in names]
    return out


def trajectory_schedule(
    samples: Sequence[PhaseSample], epochs: int, seed: int
) -> list[PhaseSample]:
    """Per epoch the trajectories shuffled, each one's samples together in their order."""
    return [s for group in trajectory_groups(samples, epochs, seed) for s in group]


def batches(
    samples: Sequence[PhaseSample],
    settings: LoraSettings,
    sequential: Sequence[str] | None = None,
) -> list[list[PhaseSample]]:
    """`schedule`'s order in steps of `settings.batch` samples; with `sequential`, no step
    mixes two capabilities (each capability's last step may be short). With
    `settings.per_trajectory`, steps of `settings.batch` whole trajectories."""
    size = settings.batch
    if settings.per_trajectory:
        if sequential:
            raise AdapterSpecError("steps of whole trajectories mix capabilities: not sequential")
        groups = trajectory_groups(samples, settings.epochs, settings.seed)
        return [sum(groups[i : i + size], []) for i in range(0, len(groups), size)]
    orders = _groups(samples, settings.epochs, settings.seed, sequential)
    return [order[i : i + size] for order in orders for i in range(0, len(order), size)]


def _backward(
    model: Any, batch: Sequence[PhaseSample], world: World, pack: bool
) -> tuple[Any, int]:
    """Backward of this rank's share of `batch`'s rows (`trainers.loss.rows`: a sample each,
    or with `pack` one per trajectory), weighted so that DDP's average over the ranks is the
    batch's mean per-sample loss; DDP syncs once, on the last backward. A rank without a row
    in a short batch still joins the sync, with a zero-weighted row. Returns the sum of the
    share's per-sample losses and the number of samples in the share."""
    from contextlib import nullcontext

    units = rows(batch, pack)
    share = world.shard(units)
    weight = world.size / len(batch) if share else 0.0
    total = None
    for i, row in enumerate(share or units[:1]):
        last = i == max(len(share), 1) - 1
        with nullcontext() if last or world.size == 1 else model.no_sync():
            loss, _ = masked_nll(model, row.sample, row.weights)  # its samples' means, summed
            (loss * weight).backward()
        if share:
            total = loss.detach() if total is None else total + loss.detach()
    return (total if total is not None else loss.detach() * 0.0), sum(r.samples for r in share)


def run_steps(
    peft_model: Any,
    params: list[Any],
    steps: Sequence[Sequence[PhaseSample]],
    lr: float,
    on_step: StepCallback | None,
    world: World = SINGLE,
    pack: bool = False,
) -> tuple[list[float], list[int]]:
    """One AdamW step per batch: each batch's mean loss (over every rank), and the number
    of samples each rank trained on. `pack`: a trajectory's samples in one forward."""
    import torch

    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    model = wrap_model(world, peft_model, params)
    peft_model.train()
    losses, seen = [], 0
    for step, batch in enumerate(steps, start=1):
        total, samples = _backward(model, batch, world, pack)
        total = global_sum(world, total)
        seen += samples
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(total) / len(batch))
        if on_step is not None and world.main:
            on_step(step, len(steps), losses[-1])
    peft_model.eval()
    return losses, gathered(world, seen)


def file_roots(backbone: str | os.PathLike[str], frozen: Mapping[str, Path]) -> dict[str, Any]:
    """Manifest roots of the backbone's and the frozen adapters' files, by path."""
    paths = {"backbone": Path(backbone)} | {f"adapter:{k}": Path(v) for k, v in frozen.items()}
    return {k: {"path": os.fspath(p), "root": manifest_of_path(p).root} for k, p in paths.items()}


def _peft_summary(config: Any) -> dict[str, Any]:
    return {
        "r": config.r,
        "lora_alpha": config.lora_alpha,
        "target_modules": sorted(config.target_modules),
    }


def save_adapter(
    peft_model: Any, name: str, out: Path, base_path: str, meta: dict[str, Any]
) -> Path:
    """A standard PEFT directory (config + safetensors + training.json + the model card,
    README.md), renamed into place."""
    from safetensors.torch import save_file

    from trainers.roots import adapter_tensors

    with adapter_dir(out) as tmp:
        tensors = {
            k: v.detach().cpu().contiguous() for k, v in adapter_tensors(peft_model, name).items()
        }
        save_file(tensors, tmp / "adapter_model.safetensors", metadata={"format": "pt"})
        config = copy.deepcopy(peft_model.peft_config[name])
        config.inference_mode = True
        config.base_model_name_or_path = base_path
        config.save_pretrained(str(tmp))
        (tmp / TRAINING_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        (tmp / CARD_FILE).write_text(model_card(meta, base_path))
    return Path(out)


def train_lora(
    *,
    backbone: str | os.PathLike[str],
    adapter: str,
    samples: Sequence[PhaseSample],
    out: str | os.PathLike[str],
    settings: LoraSettings = LoraSettings(),
    frozen: Mapping[str, Path] | None = None,
    init: Path | None = None,
    sequential: Sequence[str] | None = None,
    on_step: StepCallback | None = None,
    before_verify: Hook | None = None,
    record: Mapping[str, Any] | None = None,
    world: World = SINGLE,
) -> TrainResult:
    """Train adapter `adapter` on `samples`; verify frozen roots; save to `out`.

    `before_verify(peft_model)` runs between training and the root check (tests inject a
    change there). `sequential` (capability order) trains the groups one after another.
    `record` (data files, say) is written into training.json with the rest. In a
    distributed `world` every rank trains its share; rank 0 alone checks `out`, hashes the
    files, verifies the roots and saves, and the others wait for its outcome.
    """
    if not samples:
        raise NoSamplesError("no training samples (no phase of the capability in the data?)")
    frozen = dict(frozen or {})
    with session(world):
        on_main(world, lambda: check_empty(out))
        check_frozen(frozen, adapter)
        files = file_roots(backbone, frozen) if world.main else {}  # publishing re-checks them
        model = load_backbone(backbone, settings.dtype)
        before = {"backbone": root_of(backbone_tensors(model))} if world.main else {}
        peft_model = wrap(model, adapter, settings, init)  # PEFT mutates the model in place
        load_frozen(peft_model, frozen)
        if world.main:
            roots = resident_roots(peft_model, list(frozen))
            before |= {k: v for k, v in roots.items() if k != "backbone"}
        peft_model.to(world.device)
        params = freeze_all_but(peft_model, adapter)
        steps = batches(samples, settings, sequential)
        losses, per_rank = run_steps(
            peft_model, params, steps, settings.lr, on_step, world, settings.per_trajectory
        )
        covered = sorted({s.capability for s in samples if s.n_supervised})
        meta = {
            **dict(record or {}),
            "adapter": adapter,
            "backbone_root": files.get("backbone", {}).get("root"),
            "files": files,
            "settings": {**asdict(settings), "targets": list(settings.targets)},
            "peft": _peft_summary(peft_model.peft_config[adapter]),
            "roots": before,
            "covered": covered,
            "samples": len(samples),
            "steps": len(steps),
            "losses": losses,
            "sequential": list(sequential or []),
            "init": str(init) if init else None,
            "distributed": world.record() | {"samples_per_rank": per_rank},
        }

        def finish() -> Path:
            if before_verify is not None:
                before_verify(peft_model)
            changed = changed_roots(before, resident_roots(peft_model, list(frozen)))
            if changed:
                raise RootChangedError(changed)
            return save_adapter(peft_model, adapter, Path(out), os.fspath(backbone), meta)

        on_main(world, finish)
    logger.info(
        "trained %s on %d samples: loss %.4f -> %.4f", adapter, len(samples), losses[0], losses[-1]
    )
    return TrainResult(adapter, Path(out), losses, before, covered, settings)
