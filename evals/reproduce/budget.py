"""What a reproduce run will cost on this CPU, said before it starts.

Whether bf16 is native here (the `avx512_bf16` / `amx_bf16` flags; torch emulates bf16
without them), then an estimate of the whole run: per-unit costs measured on this machine
by a short calibration (a few LoRA training steps in the run's training dtype, a full
fine-tuning step, a prefill and decode steps of the backbone, each on `CALIBRATION_TOKENS`
tokens) times the run's counts (the tokens of every training sample and epoch, of every
episode's prefills and decodes, of the gate's scoring), which come from the run's own suite.
It is an estimate: cached adapters cost nothing, episodes end early or run to their caps.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.reproduce.config import REDUCED_AVX2_MINUTES, Sizes
from tasks.questions import KINDS

BF16_FLAGS = ("avx512_bf16", "amx_bf16")
CALIBRATION_TOKENS = 256
BUDGET_S = 45 * 60  # what `make reproduce` is meant to fit
METHODS = 8  # every method's episodes: the table's rows (`report.METHODS`)
GATE_SCORINGS = 8  # the continual part: four promotions, baseline and candidate each
VLLM_START_S = 60.0  # one vLLM engine start (two per run); not measured by the calibration


def bf16_native(cpuinfo: str = "/proc/cpuinfo") -> tuple[bool, list[str]]:
    """(whether bf16 is native: a bf16 flag in `cpuinfo`, the flags found)."""
    try:
        words = set(Path(cpuinfo).read_text().split())
    except OSError:
        return False, []
    found = [f for f in BF16_FLAGS if f in words]
    return bool(found), found


def torch_kernels() -> str:
    """The CPU kernels torch dispatches to here ("AVX512", "AVX2", ...)."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


@dataclass(frozen=True)
class UnitCosts:
    """Seconds per token, measured here."""

    lora_train: float  # a LoRA training step (forward, backward, AdamW), training dtype
    full_train: float  # a full fine-tuning step (every parameter) as the run batches it
    prefill: float  # a forward pass over new tokens (fp32, no grad)
    decode: float  # one decode step with the KV cache


@dataclass(frozen=True)
class Counts:
    """Tokens a run processes, from its suite and sizes."""

    lora_tokens: int  # sample tokens over every LoRA training step (every adapter, epoch)
    full_tokens: int  # padded tokens of Full SFT's forwards (its batches as the run cuts them)
    episodes: int
    prefill_per_episode: float  # each phase re-processes its history (a switch's rebuild)
    decode_per_episode: float  # the gold episode's generated tokens, capped as the run caps
    gate_tokens: int
    concurrency: int


def _timed(fn: Any, repeats: int) -> float:
    """The fastest of `repeats` runs after a warm-up: other processes only ever add time."""
    fn()  # warm-up: allocations, kernel selection
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def calibrate(backbone: Path, sizes: Sizes, tokens: int = CALIBRATION_TOKENS) -> UnitCosts:
    """Time two LoRA steps, two full steps, a prefill and decode steps on `backbone`."""
    import torch
    from transformers import DynamicCache

    from evals.reproduce.build import lora_settings
    from runtime.kvcache import cache_keyword
    from trainers.full import FullSettings, full_steps
    from trainers.lora import load_backbone, wrap
    from trainers.loss import masked_nll
    from trainers.phases import PhaseSample

    torch.manual_seed(0)
    model = load_backbone(backbone, sizes.train_dtype)
    ids = tuple(torch.randint(0, model.config.vocab_size, (tokens,)).tolist())
    half = tokens // 2
    sample = PhaseSample("calibration", "write", 0, ids, (0,) * half + (1,) * (tokens - half))

    def step_of(net: Any, params: list[Any]) -> Any:
        optimizer = torch.optim.AdamW(params, lr=1e-6)

        def step() -> None:
            nll, count = masked_nll(net, sample)
            (nll / count).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        return step

    peft = wrap(model, "write", lora_settings(sizes, sizes.lr, 1), None)
    params = [p for p in peft.parameters() if p.requires_grad]
    lora = _timed(step_of(peft, params), 2) / tokens
    del peft, model
    full_model = load_backbone(backbone, "float32")
    full_model.requires_grad_(True)
    settings = FullSettings(lr=1e-9, batch=sizes.full_batch, dtype=sizes.train_dtype)
    rows = [sample] * sizes.full_batch  # one AdamW update per full_batch samples, as trained
    full = _timed(lambda: full_steps(full_model, [rows], settings), 2) / (tokens * len(rows))
    full_model.requires_grad_(False)
    batch = torch.tensor([ids])
    with torch.inference_mode():  # as the reference engine runs it (`runtime.kvcache.extend`)
        prefill = _timed(lambda: full_model(input_ids=batch, logits_to_keep=1), 2) / tokens
        kwargs = {cache_keyword(full_model.__class__): DynamicCache(config=full_model.config)}
        full_model(input_ids=batch, use_cache=True, logits_to_keep=1, **kwargs)
        steps = 8

        def decode() -> None:
            for _ in range(steps):
                full_model(input_ids=batch[:, -1:], use_cache=True, logits_to_keep=1, **kwargs)

        decode_s = _timed(decode, 1) / steps
    return UnitCosts(lora, full, prefill, decode_s)


def counts(suite: Any, tokenizer: Any, sizes: Sizes) -> Counts:
    """The tokens of this run's trainings, episodes and gate, from its suite."""
    from trainers.phases import build_samples

    def lengths(split: str, capability: str | None = None) -> int:
        samples = build_samples(suite.trajectories[split], tokenizer)
        return sum(len(s.input_ids) for s in samples if capability in (None, s.capability))

    phases = sum(lengths("train", c) for c in ("plan", "search", "code", "write"))
    dev_write = lengths("dev", "write")
    per_trajectory = [build_samples([t], tokenizer) for t in suite.trajectories["train"]]
    longest = sum(max((len(s.input_ids) for s in ss), default=0) for ss in per_trajectory)
    lora = (
        sizes.epochs * phases
        + sizes.epochs * dev_write  # write -> write++
        + sizes.bad_epochs * dev_write  # write++ -> write-bad
        + sizes.shared_epochs * longest  # the Single LoRA: a forward per trajectory
    )
    n = max(1, len(per_trajectory))
    prefill = sum(len(s.input_ids) for ss in per_trajectory for s in ss) / n
    generated = sum(sum(s.loss_mask) for ss in per_trajectory for s in ss) / n
    items = sizes.gate_items * len(KINDS)
    return Counts(
        lora_tokens=lora,
        full_tokens=full_sft_tokens(build_samples(suite.trajectories["train"], tokenizer), sizes),
        episodes=METHODS * len(KINDS) * sizes.test,
        prefill_per_episode=prefill,
        decode_per_episode=min(generated, sizes.max_episode_tokens),
        gate_tokens=round(GATE_SCORINGS * items * prefill),
        concurrency=min(sizes.concurrency, len(KINDS) * sizes.test),
    )


def full_sft_tokens(samples: Sequence[Any], sizes: Sizes, max_tokens: int | None = None) -> int:
    """The (padded) tokens Full SFT's forwards process: its seeded schedule in steps of
    `full_batch`, each step's samples packed and cut into forwards as `trainers.full` does
    it for `build_full` (a trajectory's samples share one forward; at most `max_tokens`
    padded tokens a forward, default: `FullSettings`'s)."""
    from trainers.full import FullSettings, forwards, full_schedule
    from trainers.loss import rows

    settings = FullSettings(epochs=sizes.full_epochs, seed=sizes.train_seed, pack=True)
    order = full_schedule(samples, settings)
    limit = settings.max_tokens if max_tokens is None else max_tokens
    size = sizes.full_batch
    steps = [order[i : i + size] for i in range(0, len(order), size)]
    return sum(
        len(forward) * max(len(r.input_ids) for r in forward)
        for step in steps
        for forward in forwards(rows(step, settings.pack), limit)
    )


def estimate(costs: UnitCosts, n: Counts, engine: str) -> dict[str, float]:
    """Seconds per part of the run and "total". The reference engine interleaves episodes
    without batching (their tokens add up); vLLM batches decode steps over the episodes
    running at once (prefill is compute-bound, it does not shrink) and starts twice."""
    decode = n.episodes * n.decode_per_episode * costs.decode
    if engine == "vllm":
        decode /= max(1, n.concurrency)
    parts = {
        "training (LoRA adapters)": n.lora_tokens * costs.lora_train,
        "Full SFT": n.full_tokens * costs.full_train,
        "episodes": n.episodes * n.prefill_per_episode * costs.prefill + decode,
        "gate scoring": n.gate_tokens * costs.prefill,
    }
    if engine == "vllm":
        parts["vLLM engine starts (assumed, not measured)"] = 2 * VLLM_START_S
    parts["total"] = sum(parts.values())
    return parts


def budget_lines(
    parts: Mapping[str, float], costs: UnitCosts, native: tuple[bool, Sequence[str]],
    kernels: str, sizes: Sizes, preset: str, engine: str, reduced_total: float | None = None,
) -> list[str]:  # fmt: skip
    """What `make reproduce` says before it starts; `reduced_total`, the reduced size's
    estimate with the same calibration, where the run is over budget."""
    ok, flags = native
    bf16 = (
        f"native ({', '.join(flags)})"
        if ok
        else "not native (no avx512_bf16 or amx_bf16 flag: torch would emulate it)"
    )
    lines = [
        f"cpu: bf16 {bf16}; torch kernels {kernels}; training dtype {sizes.train_dtype}",
        f"calibration (measured here, s per 1,000 tokens): LoRA step {1e3 * costs.lora_train:.2f}, "
        f"full step {1e3 * costs.full_train:.2f}, prefill {1e3 * costs.prefill:.2f}, "
        f"decode {1e3 * costs.decode:.1f}; load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} CPUs (a busy machine inflates the estimate)",
        f"estimate for the {preset} size on the {engine} engine (an estimate: measured unit "
        "costs times this run's token counts; cached adapters cost nothing): "
        + ", ".join(f"{k} {v / 60:.1f} min" for k, v in parts.items() if k != "total")
        + f"; whole run ~{parts['total'] / 60:.0f} min",
    ]
    if parts["total"] > BUDGET_S and preset != "reduced":
        here = "" if reduced_total is None else f"estimated ~{reduced_total / 60:.0f} min here, "
        lines.append(
            f"over {BUDGET_S // 60} minutes: `--size reduced` (make reproduce "
            f"REPRODUCE_ARGS='--size reduced'): {here}measured {REDUCED_AVX2_MINUTES} minutes "
            "on one 2-core fp32 AVX2 EPYC (another took 1.7-2.0x as long for the same training)"
        )
    return lines
