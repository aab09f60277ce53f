"""Train one capability's LoRA over the frozen backbone, next to frozen adapters.

Only the adapter being trained has trainable parameters; the backbone and every other
adapter loaded in the process have `requires_grad=False` and never take part in the
backward pass (only the trained adapter is active). Before anything is written, the manifest
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
from trainers.errors import AdapterSpecError, NoSamplesError, RootChangedError
from trainers.loss import masked_nll
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
    # The frozen backbone's dtype while training; the LoRA weights and their updates stay
    # fp32 (peft keeps adapter weights in fp32 on a bf16 base). Half the backbone's memory;
    # not faster on this project's CPUs at rank 8 on q/k/v/o (make reproduce: 2.4-5.2 s per
    # sample in fp32, 3.2-4.7 s in bf16).
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.rank < 1 or self.epochs < 1 or self.lr <= 0 or not self.targets:
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


def schedule(
    samples: Sequence[PhaseSample], epochs: int, seed: int, sequential: Sequence[str] | None
) -> list[PhaseSample]:
    """Shuffled per epoch; `sequential` trains one capability's samples after another."""
    rng = random.Random(seed)
    groups = [list(samples)]
    if sequential:
        groups = [[s for s in samples if s.capability == cap] for cap in sequential]
    order: list[PhaseSample] = []
    for group in groups:
        for _ in range(epochs):
            epoch = list(group)
            rng.shuffle(epoch)
            order += epoch
    return order


def run_steps(
    peft_model: Any,
    params: list[Any],
    order: Sequence[PhaseSample],
    lr: float,
    on_step: StepCallback | None,
) -> list[float]:
    import torch

    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    peft_model.train()
    losses = []
    for step, sample in enumerate(order, start=1):
        nll, count = masked_nll(peft_model, sample)
        loss = nll / max(count, 1)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step, len(order), losses[-1])
    peft_model.eval()
    return losses


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
        tensors = {k: v.detach().contiguous() for k, v in adapter_tensors(peft_model, name).items()}
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
) -> TrainResult:
    """Train adapter `adapter` on `samples`; verify frozen roots; save to `out`.

    `before_verify(peft_model)` runs between training and the root check (tests inject a
    change there). `sequential` (capability order) trains the groups one after another.
    `record` (data files, say) is written into training.json with the rest.
    """
    if not samples:
        raise NoSamplesError("no training samples (no phase of the capability in the data?)")
    check_empty(out)
    frozen = dict(frozen or {})
    check_frozen(frozen, adapter)
    files = file_roots(backbone, frozen)  # what publishing re-checks on disk
    model = load_backbone(backbone, settings.dtype)
    before = {"backbone": root_of(backbone_tensors(model))}  # before PEFT mutates the model
    peft_model = wrap(model, adapter, settings, init)
    load_frozen(peft_model, frozen)
    before |= {k: v for k, v in resident_roots(peft_model, list(frozen)).items() if k != "backbone"}
    params = freeze_all_but(peft_model, adapter)
    order = schedule(samples, settings.epochs, settings.seed, sequential)
    losses = run_steps(peft_model, params, order, settings.lr, on_step)
    if before_verify is not None:
        before_verify(peft_model)
    after = resident_roots(peft_model, list(frozen))
    changed = changed_roots(before, after)
    if changed:
        raise RootChangedError(changed)
    covered = sorted({s.capability for s in samples if s.n_supervised})
    meta = {
        **dict(record or {}),
        "adapter": adapter,
        "backbone_root": files["backbone"]["root"],
        "files": files,
        "settings": {**asdict(settings), "targets": list(settings.targets)},
        "peft": _peft_summary(peft_model.peft_config[adapter]),
        "roots": before,
        "covered": covered,
        "samples": len(samples),
        "steps": len(order),
        "losses": losses,
        "sequential": list(sequential or []),
        "init": str(init) if init else None,
    }
    path = save_adapter(peft_model, adapter, Path(out), os.fspath(backbone), meta)
    logger.info(
        "trained %s on %d samples: loss %.4f -> %.4f", adapter, len(samples), losses[0], losses[-1]
    )
    return TrainResult(adapter, path, losses, before, covered, settings)
