"""Full fine-tuning (the paper's Full SFT baseline): every backbone parameter trains.

The same phase samples and loss mask as the adapters (`trainers.phases`; `masked_nll_batch`
is `masked_nll` over a padded batch), the same shuffled schedule (`trainers.lora.schedule`)
and AdamW; the result is a new backbone directory (weights, config, the backbone's tokenizer
files), written whole or not at all. It is not an adapter and the registry does not hold it:
it has no backbone root in common with the adapters.

Each optimizer step takes `batch` samples of the schedule, in order, one forward each or in
padded forwards of at most `max_tokens` padded tokens (gradients accumulate over them); the
step's loss is the mean of the samples' per-token-mean losses, as `trainers.lora.run_steps`
takes it. The weights, gradients and AdamW state stay fp32; `dtype` "bfloat16" runs the
forward and backward under CPU autocast (matmuls in bf16, as the LoRA path's bf16 backbone
does), the update in fp32: a bf16 weight would round away an update of lr 2e-5. `batch` 1 in
fp32 is the per-sample loop that came before, step for step. `pack` folds a step's
samples of one trajectory into one forward over the longest (each is a prefix of the
next): the same loss and gradients on ~2.5x fewer tokens.

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
from typing import Any

from trainers.adapter_dir import adapter_dir, check_empty
from trainers.errors import NoSamplesError
from trainers.lora import (
    DTYPES,
    TRAINING_FILE,
    LoraSettings,
    StepCallback,
    load_backbone,
    save_adapter,
    schedule,
    trajectory_schedule,
    wrap,
)
from trainers.loss import Row, masked_nll_batch, rows
from trainers.phases import PhaseSample

logger = logging.getLogger(__name__)

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")
INDEX_FILES = ("model.safetensors.index.json", "config.json", "generation_config.json")


@dataclass(frozen=True)
class FullSettings:
    lr: float = 2e-5
    epochs: int = 1
    seed: int = 0
    batch: int = 1  # samples per optimizer step
    dtype: str = "float32"  # the forward's and backward's: "bfloat16" autocasts them
    # padded tokens per forward (rows x longest); 1: every sample its own forward, unpadded.
    # On a 2-core AVX512-BF16 EPYC, 4 samples of SmolLM2 in one padded forward took 13.1 CPU
    # s a sample in bf16 (19.6 in fp32) against 9.4 one by one (bench/bench_full_sft.py)
    max_tokens: int = 1
    # Phase k's sample of a trajectory is a prefix of phase k+1's (`trainers.phases`), so with
    # `pack` the samples of one trajectory in a step share the forward of the longest, each
    # supervised token weighted 1/(its sample's count): the same loss and gradients as a
    # forward each, on fewer tokens (make reproduce's train split: 162,504 tokens in its 160
    # samples, 63,814 in their 50 trajectories). The schedule then shuffles trajectories,
    # keeping each one's samples together, so that they land in one step.
    pack: bool = False

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.lr <= 0 or self.batch < 1 or self.max_tokens < 1:
            raise ValueError(f"bad full fine-tuning settings: {self}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {self.dtype!r}")


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


def full_schedule(samples: Sequence[PhaseSample], settings: FullSettings) -> list[PhaseSample]:
    """The order Full SFT trains `samples` in (`trajectory_schedule` when packing)."""
    if settings.pack:
        return trajectory_schedule(samples, settings.epochs, settings.seed)
    return schedule(samples, settings.epochs, settings.seed, None)


def forwards(batch: Sequence[Row], max_tokens: int) -> list[list[Row]]:
    """`batch` in order, cut into padded forwards of at most `max_tokens` (rows x longest);
    a row longer than that goes alone."""
    out: list[list[Row]] = []
    for row in batch:
        last = out[-1] if out else None
        width = max([len(row.input_ids), *(len(r.input_ids) for r in last or [])])
        if last is not None and width * (len(last) + 1) <= max_tokens:
            last.append(row)
        else:
            out.append([row])
    return out


def full_steps(
    model: Any,
    steps: Sequence[Sequence[PhaseSample]],
    settings: FullSettings,
    on_step: StepCallback | None = None,
) -> list[float]:
    """One AdamW step over every parameter per batch of `steps`; each step's mean loss."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=settings.lr, weight_decay=0.0)
    autocast = settings.dtype == "bfloat16"
    model.train()
    losses: list[float] = []
    for step, batch in enumerate(steps, start=1):
        total = 0.0
        for forward in forwards(rows(batch, settings.pack), settings.max_tokens):
            samples, weights = [r.sample for r in forward], [r.weights for r in forward]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                nll, _ = masked_nll_batch(model, samples, weights)  # per-token means, summed
            (nll.sum() / len(batch)).backward()
            total += float(nll.detach().sum())
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(total / len(batch))
        if on_step is not None:
            on_step(step, len(steps), losses[-1])
    model.eval()
    return losses


def train_full(
    *,
    backbone: str | os.PathLike[str],
    samples: Sequence[PhaseSample],
    out: str | os.PathLike[str],
    settings: FullSettings = FullSettings(),
    on_step: StepCallback | None = None,
) -> FullResult:
    """Fine-tune every parameter of `backbone` (fp32 weights) on `samples`; save it to `out`."""
    import torch

    if not samples:
        raise NoSamplesError("no training samples")
    check_empty(out)
    torch.manual_seed(settings.seed)
    model = load_backbone(backbone, "float32")
    model.requires_grad_(True)
    order = full_schedule(samples, settings)
    size = settings.batch
    steps = [order[i : i + size] for i in range(0, len(order), size)]
    losses = full_steps(model, steps, settings, on_step)
    meta = {
        "what": "full fine-tuning",
        "base": os.fspath(backbone),
        "settings": asdict(settings),
        "samples": len(samples),
        "steps": len(steps),
        "losses": losses,
        "covered": sorted({s.capability for s in samples if s.n_supervised}),
    }
    with adapter_dir(out) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        _copy_tokenizer(Path(backbone), tmp)
        (tmp / TRAINING_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    count = sum(p.numel() for p in model.parameters())
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
