"""One training run as `weact train` makes it: trajectory files -> phase samples -> a LoRA.

`train_from_files` is the library call behind the command; `evals.reproduce` calls it too, so
a reproduce run trains exactly as the command does without going through a CLI.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainers.distributed import SINGLE, World
from trainers.errors import NoSamplesError
from trainers.full import FullResult, FullSettings, train_full
from trainers.lora import LoraSettings, StepCallback, TrainResult, train_lora
from trainers.phases import PhaseSample, build_samples
from trainers.publish import data_record
from trainers.trajectory import read_trajectories

SHARED = "shared"
"""The adapter name of the baseline trained on every phase (`weact train --shared`)."""


@dataclass(frozen=True)
class Trained:
    """A finished run: the trainer's result and the number of phase samples it saw."""

    result: TrainResult
    samples: int


def quiet_libraries() -> None:
    """No per-file loading bars from transformers; peft's use of a deprecated API is not ours."""
    import warnings

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    warnings.filterwarnings(
        "ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning
    )


def tokenizer_of(backbone: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(backbone)


def read_samples(
    data: Sequence[Path], backbone: Path, capabilities: set[str] | None
) -> list[PhaseSample]:
    """The phase samples of every trajectory in `data` (only `capabilities`' when given)."""
    trajectories = [t for path in data for t in read_trajectories(path)]
    return build_samples(trajectories, tokenizer_of(backbone), capabilities)


def train_from_files(
    *,
    data: Sequence[Path],
    backbone: Path,
    out: Path,
    capability: str | None,
    settings: LoraSettings,
    frozen: Mapping[str, Path] | None = None,
    init: Path | None = None,
    sequential: bool = False,
    on_step: StepCallback | None = None,
    world: World = SINGLE,
) -> Trained:
    """Train `capability`'s adapter (the shared baseline when None, its capabilities one
    after another with `sequential`) on the trajectories in `data`; `training.json` records
    the data files. `NoSamplesError` when no phase of the capability has supervised tokens.
    In a distributed `world` (`trainers.distributed.detect`) every rank reads the data and
    trains its share of each batch; rank 0 alone writes `out`."""
    quiet_libraries()
    samples = read_samples(data, backbone, None if capability is None else {capability})
    if not samples:
        raise NoSamplesError(f"no {capability!r} phase with supervised tokens in {list(data)}")
    order = list(dict.fromkeys(s.capability for s in samples)) if sequential else None
    result = train_lora(
        backbone=backbone,
        adapter=SHARED if capability is None else capability,
        samples=samples,
        out=out,
        settings=settings,
        frozen=frozen,
        init=init,
        sequential=order,
        on_step=on_step,
        record=data_record(list(data)),
        world=world,
    )
    return Trained(result, len(samples))


def train_full_from_files(
    *,
    data: Sequence[Path],
    backbone: Path,
    out: Path,
    settings: FullSettings,
    on_step: StepCallback | None = None,
) -> tuple[FullResult, int]:
    """Full SFT: every backbone parameter on every phase sample of `data` (the shared
    LoRA's samples and loss mask); returns the result and the number of samples."""
    quiet_libraries()
    samples = read_samples(data, backbone, None)
    if not samples:
        raise NoSamplesError(f"no phase with supervised tokens in {list(data)}")
    return train_full(backbone=backbone, samples=samples, out=out, settings=settings,
                      on_step=on_step), len(samples)  # fmt: skip
