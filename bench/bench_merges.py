"""Diagnostic: separate adapters vs static merges vs one shared LoRA, on SmolLM2 (CPU).

Trains one LoRA per capability (plan, search, write) on phase-wise samples of generated
research trajectories, merges them (Full Additive, TIES, DARE-TIES), trains one shared LoRA
sequentially on the same phases (plan, then search, then write), and prints the masked NLL
of each capability's held-out phase samples under each configuration, side by side, with the
ratio of each row's mean to the separate adapters' mean. Small data (tool schemas left out of
the system turn unless --with-tools, to keep samples short): a few minutes on 2 idle cores.

    .venv/bin/python bench/bench_merges.py [--train 2] [--held-out 2] [--epochs 2] [--rank 8]

With so few steps the shared LoRA still gains from seeing three times the data; `--train 4
--epochs 3` (about three times longer) trains each adapter well enough for forgetting and
merge interference to dominate.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

CAPABILITIES = ("plan", "search", "write")


def _quiet() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=2, help="training trajectories")
    parser.add_argument("--held-out", type=int, default=2, help="held-out trajectories")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--density", type=float, default=0.5)
    parser.add_argument("--backbone", type=Path, help="default: runtime.models.smollm2_dir()")
    parser.add_argument(
        "--with-tools",
        action="store_true",
        help="keep the tool schemas in the system turn (about 250 more tokens per sample)",
    )
    return parser.parse_args()


def _step(label: str):  # -> StepCallback
    def on_step(step: int, total: int, loss: float) -> None:
        if step == 1 or step == total or step % 4 == 0:
            print(f"  {label}: step {step}/{total} loss {loss:.4f}", flush=True)

    return on_step


def main() -> None:
    _quiet()
    args = _args()
    from transformers import AutoTokenizer

    from runtime.models import smollm2_dir
    from trainers.evaluate import evaluate_nll
    from trainers.lora import LoraSettings, train_lora
    from trainers.merge import METHODS, MergeSpec, merge_adapters
    from trainers.phases import build_samples
    from trainers.tasks import generate

    started = time.perf_counter()
    backbone = args.backbone or smollm2_dir()
    tokenizer = AutoTokenizer.from_pretrained(backbone)

    def data(n: int, seed: int) -> list:
        trajectories = generate(n, seed=seed)
        return trajectories if args.with_tools else [replace(t, tools=()) for t in trajectories]

    train = build_samples(data(args.train, 11), tokenizer, set(CAPABILITIES))
    held_out = build_samples(data(args.held_out, 999), tokenizer, set(CAPABILITIES))
    lengths = {c: max(len(s.input_ids) for s in train if s.capability == c) for c in CAPABILITIES}
    print(
        f"backbone {backbone}; {len(train)} train / {len(held_out)} held-out samples; "
        f"longest sample per capability {lengths}",
        flush=True,
    )
    settings = LoraSettings(
        rank=args.rank, alpha=2 * args.rank, lr=args.lr, epochs=args.epochs, seed=0
    )
    work = Path(tempfile.mkdtemp(prefix="bench-merges-"))
    separate = {}
    for cap in CAPABILITIES:
        samples = [s for s in train if s.capability == cap]
        result = train_lora(
            backbone=backbone,
            adapter=cap,
            samples=samples,
            out=work / cap,
            settings=settings,
            on_step=_step(cap),
        )
        separate[cap] = result.out
    shared = train_lora(
        backbone=backbone,
        adapter="shared",
        samples=train,
        out=work / "shared",
        settings=settings,
        sequential=CAPABILITIES,
        on_step=_step("shared-seq"),
    )
    configs: dict[str, tuple[dict, Path | None]] = {
        "backbone (no adapter)": ({}, None),
        "separate adapters (WeAct)": (separate, None),
    }
    for method in METHODS:
        spec = MergeSpec(method, density=args.density, seed=0)
        out = merge_adapters([separate[c] for c in CAPABILITIES], work / f"merge-{method}", spec)
        configs[f"merge: {METHODS[method].title}"] = ({}, out)
    configs["shared LoRA, sequential"] = ({}, shared.out)
    rows = {}
    for label, (assignment, default) in configs.items():
        scores = evaluate_nll(
            backbone=backbone, samples=held_out, assignment=assignment, default=default
        )
        rows[label] = [scores[c].mean for c in CAPABILITIES]
    _print_table(rows)
    print(f"total {time.perf_counter() - started:.0f} s; artifacts in {work}")


def _print_table(rows: dict[str, list[float]]) -> None:
    ref = sum(rows["separate adapters (WeAct)"]) / len(CAPABILITIES)
    head = f"{'configuration':<34}" + "".join(f"{c:>10}" for c in CAPABILITIES)
    head += f"{'mean':>10}{'x separate':>12}"
    print("\nmasked NLL per supervised token on held-out phase samples (lower is better)")
    print(head)
    print("-" * len(head))
    for label, values in rows.items():
        mean = sum(values) / len(values)
        cells = "".join(f"{v:>10.4f}" for v in values)
        print(f"{label:<34}{cells}{mean:>10.4f}{mean / ref:>11.2f}x")


if __name__ == "__main__":
    main()
