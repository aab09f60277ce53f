"""Full SFT seconds per sample, the per-sample loop against the batched trainer.

`python bench/bench_full_sft.py BACKBONE VARIANT [N] [THREADS]` trains the first N (16)
samples of the full reproduce size's seeded Full SFT schedule (research suite, seed 0, 10
train questions per kind, 2 epochs) on BACKBONE and prints wall and process CPU seconds per
step and per sample. VARIANT: `loop:B` is the path before batching (`trainers.lora.run_steps`,
one forward and backward per sample, B samples per AdamW step; `loop:1` is what Full SFT
did), `fp32:B` / `bf16:B` are `trainers.full.full_steps` (padded forwards, B samples per
step, bf16 autocast or not; `fp32acc:B` / `bf16acc:B`: one sample per forward, the
gradients of B accumulated before each step). Run the variants one after another on an
idle machine; on a shared one compare CPU seconds with THREADS 1 (no spinning threads
inflate them).
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path


def main(backbone: str, variant: str, n: int = 16, threads: int | None = None) -> None:
    import torch

    from evals.suite import generate_suite
    from trainers.full import FullSettings, full_steps
    from trainers.lora import load_backbone, run_steps, schedule
    from trainers.phases import build_samples
    from trainers.training import tokenizer_of

    if threads:
        torch.set_num_threads(threads)
    suite = generate_suite("research", 0, {"train": 10, "dev": 1, "test": 8})
    samples = build_samples(suite.trajectories["train"], tokenizer_of(Path(backbone)))
    order = schedule(samples, 2, 0, None)[:n]
    kind, size = variant.split(":")
    steps = [order[i : i + int(size)] for i in range(0, n, int(size))]
    torch.manual_seed(0)
    model = load_backbone(backbone, "float32")
    model.requires_grad_(True)
    start, cpu = time.perf_counter(), time.process_time()

    def tick(step: int, total: int, loss: float) -> None:
        wall, used = time.perf_counter() - start, time.process_time() - cpu
        print(f"{variant} step {step}/{total} loss {loss:.3f}: {wall:.1f} s wall, {used:.1f} s cpu")

    if kind == "loop":
        run_steps(model, list(model.parameters()), steps, 2e-5, tick)
    else:
        dtype = "bfloat16" if kind.startswith("bf16") else "float32"
        limit = 1 if kind.endswith("acc") else FullSettings().max_tokens  # 1: no padding
        settings = FullSettings(lr=2e-5, batch=int(size), dtype=dtype, max_tokens=limit)
        full_steps(model, steps, settings, tick)
    wall, used = time.perf_counter() - start, time.process_time() - cpu
    tokens = sum(len(s.input_ids) for s in order)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(
        f"{variant}, {torch.get_num_threads()} threads, {n} samples ({tokens} tokens): "
        f"{wall / n:.2f} s/sample wall, {used / n:.2f} CPU s/sample, max RSS {rss:.1f} GB"
    )


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0], args[1], *(int(a) for a in args[2:]))
