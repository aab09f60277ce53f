"""Full fine-tuning (the paper's Full SFT baseline): every backbone parameter trains.

The same phase samples and loss mask as the adapters (`trainers.phases`, `masked_nll`), the
same shuffled schedule and AdamW steps (`trainers.lora.schedule`, `run_steps`); the result is
a new backbone directory (weights, config, the backbone's tokenizer files), written whole or
not at all. It is not an adapter and the registry does not hold it: it has no backbone root
in common with the adapters.

`identity_adapter` writes a LoRA whose B matrices are zero (peft's initialisation), an exact
no-op on its backbone: a fully fine-tuned backbone is served under the hard policy with one
of them per capability, so its episodes follow the same protocol (runtime switches, the same
tool turns in the history) as every adapter method's, with no weights of their own.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from trainers.adapter_dir import adapter_dir, check_empty
from trainers.errors import NoSamplesError
from trainers.lora import (
    TRAINING_FILE,
    LoraSettings,
    StepCallback,
    load_backbone,
    run_steps,
    save_adapter,
    schedule,
    wrap,
)
from trainers.phases import PhaseSample

logger = logging.getLogger(__name__)

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")
INDEX_FILES = ("model.safetensors.index.json", "config.json", "generation_config.json")


@dataclass(frozen=True)
class FullSettings:
    lr: float = 2e-5
    epochs: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.lr <= 0:
            raise ValueError(f"bad full fine-tuning settings: {self}")


@dataclass(frozen=True)
class FullResult:
    out: Path
    losses: list[float]
    parameters: int  # trained parameters (every one of the backbone's)


def _copy_tokenizer(backbone: Path, out: Path) -> None:
    """The backbone's non-weight files (tokenizer, chat template), not its weights or config."""
    for f in backbone.iterdir():
        if f.is_file() and not f.name.endswith(WEIGHT_SUFFIXES) and f.name not in INDEX_FILES:
            shutil.copy2(f, out / f.name)


def train_full(
    *,
    backbone: str | os.PathLike[str],
    samples: Sequence[PhaseSample],
    out: str | os.PathLike[str],
    settings: FullSettings = FullSettings(),
    on_step: StepCallback | None = None,
) -> FullResult:
    """Fine-tune every parameter of `backbone` (fp32) on `samples`; save it to `out`."""
    import torch

    if not samples:
        raise NoSamplesError("no training samples")
    check_empty(out)
    torch.manual_seed(settings.seed)
    model = load_backbone(backbone, "float32")
    model.requires_grad_(True)
    params = [p for p in model.parameters() if p.requires_grad]
    order = schedule(samples, settings.epochs, settings.seed, None)
    # one sample per step, as before `run_steps` took batches (single process)
    losses, _seen = run_steps(model, params, [[s] for s in order], settings.lr, on_step)
    meta = {
        "what": "full fine-tuning",
        "base": os.fspath(backbone),
        "settings": asdict(settings),
        "samples": len(samples),
        "steps": len(order),
        "losses": losses,
        "covered": sorted({s.capability for s in samples if s.n_supervised}),
    }
    with adapter_dir(out) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        _copy_tokenizer(Path(backbone), tmp)
        (tmp / TRAINING_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    count = sum(p.numel() for p in params)
    logger.info("full fine-tuning, %d parameters: loss %.4f -> %.4f", count, losses[0], losses[-1])
    return FullResult(Path(out), losses, count)


def identity_adapter(
    backbone: str | os.PathLike[str], out: str | os.PathLike[str], name: str, rank: int = 1
) -> Path:
    """A LoRA of `backbone` whose B matrices are zero: loading it changes no output."""
    check_empty(out)
    model = load_backbone(backbone, "float32")
    peft_model = wrap(model, name, LoraSettings(rank=rank, alpha=rank), None)
    meta = {"what": "identity adapter (B = 0)", "adapter": name, "base": os.fspath(backbone)}
    return save_adapter(peft_model, name, Path(out), os.fspath(backbone), meta)
