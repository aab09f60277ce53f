"""Full SFT seconds per sample, the per-sample loop against the batched trainer.

`python bench/bench_full_sft.py [--backbone DIR] [--variant V ...] [--n N] [--threads T]`
(defaults: the packaged SmolLM2, `loop:1` then `bf16acc:8`, 8 samples) trains N samples of
the full reproduce size's Full SFT data (research suite, seed 0, 10 train questions per
kind, 2 epochs) on BACKBONE and prints wall and process CPU seconds per
step and per sample. VARIANT: `loop:B` is the path before batching (`trainers.lora.run_steps`,
one forward and backward per sample, B samples per AdamW step; `loop:1` is what Full SFT
did), `fp32:B` / `bf16:B` are `trainers.full.full_steps` (padded forwards, B samples per
step, bf16 autocast or not; `fp32acc:B` / `bf16acc:B`: one sample per forward, the
gradients of B accumulated before each step; `bf16pack:B` / `fp32pack:B`: each step's samples
of one trajectory in one forward over the longest, `FullSettings.pack`). Every variant trains
the same N samples: the first N of the trajectory-grouped schedule Full SFT packs (the
variants without packing take them in that order too). Run the variants one after another on an
idle machine; on a shared one compare CPU seconds with THREADS 1 (no spinning threads
inflate them). With two or more variants it ends with each one's wall and CPU time per sample
as a ratio of the first's, measured side by side in the run.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path


def main(
    backbone: str, variant: str, n: int = 16, threads: int | None = None
) -> tuple[float, float]:
    """Train the first `n` samples as `variant` says; wall and CPU seconds per sample."""
    import torch

    from evals.suite import generate_suite
    from trainers.full import FullSettings, full_steps
    from trainers.lora import load_backbone, run_steps, trajectory_schedule
    from trainers.phases import build_samples
    from trainers.training import tokenizer_of

    if threads:
        torch.set_num_threads(threads)
    suite = generate_suite("research", 0, {"train": 10, "dev": 1, "test": 8})
    samples = build_samples(suite.trajectories["train"], tokenizer_of(Path(backbone)))
    order = trajectory_schedule(samples, 2, 0)[:n]
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
        limit = 1 if kind.endswith(("acc", "pack")) else 8192  # 1: no padding
        pack = kind.endswith("pack")
        settings = FullSettings(lr=2e-5, batch=int(size), dtype=dtype, max_tokens=limit, pack=pack)
        full_steps(model, steps, settings, tick)
    wall, used = time.perf_counter() - start, time.process_time() - cpu
    tokens = sum(len(s.input_ids) for s in order)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(
        f"{variant}, {torch.get_num_threads()} threads, {n} samples ({tokens} tokens): "
        f"{wall / n:.2f} s/sample wall, {used / n:.2f} CPU s/sample, max RSS {rss:.1f} GB"
    )
    return wall / n, used / n


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", help="a converted backbone (default: packaged SmolLM2)")
    parser.add_argument("--variant", action="append", help="loop:B, fp32:B, bf16acc:B, ...")
    parser.add_argument("--n", type=int, default=8, help="samples trained per variant")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.backbone is None:
        from runtime.models import smollm2_dir

        args.backbone = str(smollm2_dir())
    variants = args.variant or ["loop:1", "bf16acc:8"]
    results = [main(args.backbone, v, args.n, args.threads) for v in variants]
    first_wall, first_cpu = results[0]
    for variant, (wall, cpu) in zip(variants, results, strict=True):
        ratio = f"{wall / first_wall:.2f}x wall, {cpu / first_cpu:.2f}x CPU"
        print(f"{variant}: {ratio} of {variants[0]}")


if __name__ == "__main__":
    cli()
