"""Sizes of a reproduce run: flags, `REPRODUCE_*` environment variables, and presets.

The full size is what `make reproduce` runs (sized for 45 minutes on 2 CPU cores with
native bf16 and SmolLM2-135M: 23-39 with AMX, 57 with AVX512-BF16 alone; 96 in fp32 on AVX2);
`reduced` is sized for 45 minutes on a 2-core fp32 AVX2 CPU (it took 43 on one; another
trained 1.7-2.0x slower: the pre-run estimate says what it will take here); `quick` is the
tiny size the test runs on the tiny model. Every field can be set by a flag (`--test 6`) or
by the environment (`REPRODUCE_TEST=6`, read by the settings class `SizeSettings`, typed as
the field); flags win.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from pydantic import ValidationError, create_model
from pydantic_settings import BaseSettings, SettingsConfigDict

from trainers.lora import DTYPES


@dataclass(frozen=True)
class Sizes:
    seed: int = 0  # the questions (the research suite) and the bad write's shuffled answers
    # The trainings' and merges' seed (LoRA init, sample order, Full SFT's schedule, DARE's
    # drops): other training seeds on the same questions tell a method's spread from its rank
    train_seed: int = 0
    train: int = 10  # train questions per kind (x5 kinds -> gold trajectories)
    dev: int = 1  # dev questions per kind: write++'s new data (no replay)
    test: int = 8  # test questions per kind (every method's episodes: 40 in all)
    gate_items: int = 2  # test questions per kind whose phase samples the NLL gate scores
    rank: int = 8
    shared_rank: int = 32  # the Single LoRA: as many parameters as the four phase adapters
    alpha: int = 16
    lr: float = 3e-3
    epochs: int = 1
    # The Single LoRA's passes over the train split, in steps of one whole trajectory (every
    # phase of it in one forward; `LoraSettings.per_trajectory`). One sample per step, as it was
    # trained before, it wrote its plan where the answer belongs: 0 % after 1 epoch, 12.5 % and
    # 0 % after 2 on two CPUs, in 702 s (AMX Xeon); per trajectory 42.5 % in 261 s there
    shared_epochs: int = 2
    # The frozen backbone while training (weact train --dtype). "auto": bfloat16 where the CPU
    # has AVX512-BF16 (a train step 1.9 s vs fp32 3.9 s per 1,000 tokens on such an EPYC),
    # else float32: on an AVX2-only EPYC torch emulates bf16 (a 512x576 @ 576x1536 matmul
    # 731 ms vs 11 ms in fp32) and the first adapter had not finished after 66 minutes.
    train_dtype: str = "auto"
    # Full SFT: every backbone parameter, on the Single LoRA's samples and passes; a full
    # fine-tune takes a learning rate ~100x below a LoRA's (not tuned here). `full_batch`
    # samples per AdamW step in padded forwards, under bf16 autocast when train_dtype is
    # bfloat16 (fp32 weights and update): one sample per step paid a 135M-parameter AdamW
    # update per sample. 2e-5 was the lr at one sample per step; at 8 the steps are 8x
    # fewer, and the lr follows Adam's square-root rule (Malladi et al. 2022): 2e-5 * sqrt(8)
    full_lr: float = 5.7e-5
    full_epochs: int = 2
    full_batch: int = 8
    update_lr: float = 1e-3  # write -> write++
    bad_lr: float = 6e-3  # write++ -> the deliberately bad write (the new data, answers shuffled)
    bad_epochs: int = 3
    max_new_tokens: int = 96  # per generation step (a cited answer takes 40-70 tokens)
    max_steps: int = 14  # generation steps per episode (a gold episode takes 8-11)
    max_phase_steps: int = 5  # hard policy: generations per phase (gold: 1-4), then move on
    max_episode_tokens: int = 448  # generated tokens per episode (gold: 203-305)
    # episodes at once: the whole test split (vLLM batches them; 40 at once decoded WeAct-hard's
    # test split in 135 s against 164 s for 16 at once, engine start included)
    concurrency: int = 40
    tolerance: float = 0.05  # gate tolerance of the NLL benchmarks (nats per token)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


FULL = Sizes()
QUICK = Sizes(
    train=1,
    dev=1,
    test=1,
    gate_items=1,
    rank=2,
    shared_rank=8,
    alpha=4,
    # lr 0.1: the phase adapters learn something in one epoch (write++'s test write NLL 5.87,
    # 5.78 in bf16), the same with AVX2 or AVX-512 kernels. At lr 1e-2 it stayed at 6.92, next
    # to untrained, so the bad write below had nothing to break: whether lr 100 made it worse
    # depended on kernel rounding (+0.04, CI [-0.07, 0.13] with AVX-512 kernels: passed;
    # +0.32, CI [0.07, 0.57] with ATEN_CPU_CAPABILITY=avx2: refused).
    lr=1e-1,
    update_lr=1e-3,
    # The tiny random model cannot learn answers in a few steps, so shuffling them alone does
    # not make it worse: trained on them at lr 0.1 to 1 its write NLL fell 1.4 to 1.5 (it
    # learns their format). A divergent learning rate does once write has learned: at lr 100
    # write NLL rose 1.39 (CI [1.33, 1.46]) with AVX-512 kernels, 1.35 with AVX2, 1.11 in
    # bf16; the diverged weights differ between them, the damage does not.
    bad_lr=100.0,
    bad_epochs=1,
    shared_epochs=1,
    full_lr=1e-3,
    full_epochs=1,
    full_batch=2,  # the test's Full SFT still takes a padded batch
    train_dtype="float32",
    max_new_tokens=6,
    max_steps=6,
    max_phase_steps=2,
    max_episode_tokens=24,
    concurrency=2,
)
# Meant for 45 minutes on a 2-core fp32 AVX2 CPU: 4 train questions per kind, 4 test questions
# per kind and shorter episodes; every method still runs, and the Single LoRA keeps its two
# epochs (after one it scored 0 on every kind). Measured end to end on such a CPU (an AVX2-only
# EPYC): with 2 train questions per kind and 5 test it took 31:43 (af3400b) and every method
# scored 0 on the four retrieval kinds: it separated nothing. With 4 and 4 (2026-12-07): 42:54
# for the run, 47:45 with the venvs built by it; WeAct-hard learns name and year (75 %, 50 %)
# and the Single LoRA name (75 %); the merges, WeAct-soft and Full SFT (8 AdamW steps) stay at
# 0, WeAct-hard's 25.0 % ahead of each by 5 discordant questions of 20: p=0.062, short of
# significance. With `--test 8` (another such EPYC, training as fast): 63:45, the episodes
# twice as long (WeAct-soft's a third of them); WeAct-hard 15.0 % ahead of four rows at 0
# (p=0.031), the Single LoRA 37.5 % ahead of WeAct-hard (p=0.022).
REDUCED = replace(
    FULL,
    train=4,
    test=4,
    gate_items=1,
    full_epochs=1,
    bad_epochs=1,
    max_new_tokens=80,
    max_steps=12,
    max_episode_tokens=320,
)
PRESETS = {"full": FULL, "reduced": REDUCED, "quick": QUICK}
# what `--help` and the over-budget line say: the reduced size measured on an AVX2-only EPYC
REDUCED_AVX2_MINUTES = 43
ENV_PREFIX = "REPRODUCE_"
AT_LEAST_ONE = (
    "train", "dev", "test", "gate_items", "rank", "shared_rank", "epochs", "shared_epochs",
    "full_epochs", "full_batch",
    "bad_epochs", "max_steps", "max_phase_steps", "max_episode_tokens", "concurrency",
)  # fmt: skip


class _Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")


_OPTIONAL_FIELDS: dict[str, Any] = {f.name: (type(f.default) | None, None) for f in fields(Sizes)}
SizeSettings: type[BaseSettings] = create_model(
    "SizeSettings",
    __base__=_Settings,
    __doc__="`REPRODUCE_<FIELD>`: any field of `Sizes`, typed as it is there; None when unset.",
    **_OPTIONAL_FIELDS,
)


def env_sizes() -> dict[str, Any]:
    """The `REPRODUCE_<FIELD>` variables that are set; `ValueError` naming one of a wrong type."""
    try:
        settings = SizeSettings()
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][0])
        kind = type(getattr(FULL, name)).__name__
        raise ValueError(
            f"{ENV_PREFIX}{name.upper()}={error['input']!r}: expected {kind}"
        ) from None
    return settings.model_dump(exclude_none=True)


def sizes_from(preset: str = "full", overrides: Mapping[str, Any] | None = None) -> Sizes:
    """The preset, then `REPRODUCE_<FIELD>` variables, then explicit overrides (not None)."""
    names = [f.name for f in fields(Sizes)]
    given = {k: v for k, v in (overrides or {}).items() if v is not None and k in names}
    sizes = replace(PRESETS[preset], **{**env_sizes(), **given})
    for n in AT_LEAST_ONE:
        if getattr(sizes, n) < 1:
            raise ValueError(f"{n} must be at least 1, got {getattr(sizes, n)}")
    if sizes.train_dtype == "auto":
        from runtime.engines.vllm.engine import cpu_dtype  # reads /proc/cpuinfo

        sizes = replace(sizes, train_dtype=cpu_dtype())
    if sizes.train_dtype not in DTYPES:
        choices = ", ".join(("auto", *DTYPES))
        raise ValueError(f"train_dtype must be one of {choices}, not {sizes.train_dtype!r}")
    return sizes
