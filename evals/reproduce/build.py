"""Training and merging every adapter a reproduce run needs, through the library calls of
`weact train` and `weact merge` (`trainers.training.train_from_files`,
`trainers.merge.merge_adapters`), each cached by a digest of its inputs.

- plan, search, code, write: phase-wise LoRA, each on its own phases of the train split.
- shared (Single LoRA): one LoRA on every phase of the train split (`weact train --shared`),
  of rank `shared_rank` (default: the phase adapters' ranks together, as many parameters).
- additive, ties, dare_ties: static merges of plan, search, code and write.
- write++: write trained further on the dev split's write phases only (no replay).
- full_sft (Full SFT): every backbone parameter fine-tuned on the train split's phase samples
  (the shared LoRA's data and loss mask), a new backbone directory; `identity`: a zero LoRA
  of it, loaded under every capability's name so it is served by the same hard-policy
  protocol as the adapter methods.
- write-bad: write++ trained further on the same new data with its answers shuffled (a
  labelling bug in an update): what the gate must refuse.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from evals.reproduce.cache import AdapterCache, adapter_root, file_digest, source_digest
from evals.reproduce.config import Sizes
from evals.suite import trajectories_file
from tasks.trajectories import ANSWER_PREFIX
from trainers.full import FullSettings, identity_adapter
from trainers.lora import LoraSettings
from trainers.merge import MergeSpec, merge_adapters
from trainers.training import train_from_files, train_full_from_files

CAPABILITIES = ("plan", "search", "code", "write")
MERGES = ("additive", "ties", "dare_ties")
MERGE_METHOD = {"additive": "linear", "ties": "ties", "dare_ties": "dare_ties"}


def _silent(line: str) -> None:
    """The log of a build nobody watches."""


@dataclass
class Built:
    """Adapter directories by name, whether each was reused, and the seconds each took."""

    adapters: dict[str, Path] = field(default_factory=dict)
    reused: dict[str, bool] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    data: dict[str, Path] = field(default_factory=dict)


def _write_if_changed(path: Path, data: bytes) -> Path:
    if not path.is_file() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return path


def shuffled_answers(lines: list[str], seed: int) -> list[str]:
    """Each trajectory's write turn (its cited answer) swapped with another trajectory's:
    every answer is wrong for its question (a derangement: a seeded shuffle, then a rotation)."""
    rows = [json.loads(line) for line in lines]
    spots = []  # (row, message index) of each write turn
    for r, row in enumerate(rows):
        for m, message in enumerate(row["messages"]):
            content = message.get("content") or ""
            if message.get("role") == "assistant" and f"\n{ANSWER_PREFIX}" in content:
                spots.append((r, m))
    if len(spots) < 2:
        raise ValueError("shuffling answers needs at least two write turns")
    order = list(range(len(spots)))
    random.Random(seed).shuffle(order)
    texts = [rows[r]["messages"][m]["content"] for r, m in spots]
    for i, pos in enumerate(order):
        r, m = spots[pos]
        rows[r]["messages"][m]["content"] = texts[order[(i + 1) % len(order)]]
    return [json.dumps(row, ensure_ascii=False) for row in rows]


def write_data(suite_dir: Path, work: Path, seed: int) -> dict[str, Path]:
    """The training files: train, dev (write++'s new data) and dev with shuffled answers."""
    train = (suite_dir / trajectories_file("train")).read_text(encoding="utf-8")
    dev = (suite_dir / trajectories_file("dev")).read_text(encoding="utf-8")
    bad = shuffled_answers(dev.splitlines(), seed)
    return {
        "train": _write_if_changed(work / "train.jsonl", train.encode()),
        "dev": _write_if_changed(work / "dev.jsonl", dev.encode()),
        "shuffled": _write_if_changed(
            work / "dev-shuffled.jsonl", ("\n".join(bad) + "\n").encode()
        ),
    }


def lora_settings(sizes: Sizes, lr: float, epochs: int, rank: int | None = None) -> LoraSettings:
    """The LoRA settings of one training. Another rank keeps alpha / sqrt(rank) (rsLoRA's
    scale): with Adam every rank-1 component moves at the learning rate, so alpha / rank at
    rank 32 made the Single LoRA's steps 4x the phase adapters' and it degenerated (repeated
    digits, broken tool calls) where alpha 32 trained it to a loss of 0.007."""
    rank = sizes.rank if rank is None else rank
    alpha = round(sizes.alpha * math.sqrt(rank / sizes.rank))
    return LoraSettings(
        rank=rank, alpha=alpha, lr=lr, epochs=epochs, seed=sizes.train_seed, dtype=sizes.train_dtype
    )


def settings_record(settings: LoraSettings) -> dict[str, Any]:
    """The settings as the cache key records them (JSON)."""
    return {**asdict(settings), "targets": list(settings.targets)}


class Builder:
    def __init__(
        self,
        backbone: Path,
        cache: AdapterCache,
        sizes: Sizes,
        built: Built,
        log: Callable[[str], None] = _silent,
    ) -> None:
        self.backbone = backbone
        self.log = log
        self.cache = cache
        self.sizes = sizes
        self.built = built
        self.backbone_root = adapter_root(backbone)
        self.source = source_digest()

    def _get(self, name: str, inputs: dict[str, Any], build: Any) -> Path:
        start = time.perf_counter()

        def announced(out: Path) -> None:
            self.log(f"{name}: building ...")
            build(out)

        path = self.cache.get(name, inputs, announced)
        self.built.adapters[name] = path
        self.built.reused[name] = self.cache.reused[name]
        took = self.built.seconds[name] = time.perf_counter() - start
        self.log(f"{name}: {'reused from the cache' if self.built.reused[name] else 'built'} "
                 f"in {took:.1f} s")  # fmt: skip
        return path

    def train(
        self,
        name: str,
        data: Path,
        *,
        capability: str | None,
        lr: float,
        epochs: int,
        init: Path | None = None,
        rank: int | None = None,
        per_trajectory: bool = False,
    ) -> Path:
        settings = lora_settings(self.sizes, lr, epochs, rank)
        settings = replace(settings, per_trajectory=per_trajectory)
        inputs = {
            "what": "train",
            "capability": capability,
            "data": file_digest(data),
            "backbone": self.backbone_root,
            "init": adapter_root(init) if init is not None else None,
            "settings": settings_record(settings),
            "trainers": self.source,
        }

        def build(out: Path) -> None:
            run = train_from_files(
                data=[data], backbone=self.backbone, out=out, capability=capability,
                settings=settings, init=init,
            )  # fmt: skip
            losses = run.result.losses
            self.log(f"{name}: {run.samples} samples, loss {losses[0]:.4f} -> {losses[-1]:.4f}")

        return self._get(name, inputs, build)

    def merge(
        self, name: str, method: str, inputs_of: dict[str, Path], weights: list[float]
    ) -> Path:
        inputs = {
            "what": "merge",
            "method": method,
            "inputs": {cap: adapter_root(p) for cap, p in inputs_of.items()},
            "weights": weights,
            "seed": self.sizes.train_seed,
            "trainers": self.source,
        }

        def build(out: Path) -> None:
            spec = MergeSpec(method, tuple(weights), seed=self.sizes.train_seed)
            merge_adapters(list(inputs_of.values()), out, spec)
            self.log(f"{name}: merged {len(inputs_of)} adapters ({method})")

        return self._get(name, inputs, build)


def phase_builder(
    suite_dir: Path,
    backbone: Path,
    work: Path,
    sizes: Sizes,
    log: Callable[[str], None] = _silent,
) -> Builder:
    """A builder of the run's adapters; `log` hears one line per adapter trained or merged."""
    built = Built()
    built.data = write_data(suite_dir, work / "data", sizes.seed)
    return Builder(backbone, AdapterCache(work / "adapters"), sizes, built, log)


def build_phases(b: Builder) -> Built:
    """The phase adapters and the continual part's: plan, search, code, write, write++,
    write-bad (trained or reused)."""
    built, sizes = b.built, b.sizes
    train, dev, bad = built.data["train"], built.data["dev"], built.data["shuffled"]
    for cap in CAPABILITIES:
        b.train(cap, train, capability=cap, lr=sizes.lr, epochs=sizes.epochs)
    b.train(
        "write++", dev, capability="write", lr=sizes.update_lr, epochs=sizes.epochs,
        init=built.adapters["write"],
    )  # fmt: skip
    b.train(
        "write-bad", bad, capability="write", lr=sizes.bad_lr, epochs=sizes.bad_epochs,
        init=built.adapters["write++"],
    )  # fmt: skip
    return built


def build_baselines(b: Builder) -> Built:
    """The shared LoRA and the static merges (after `build_phases`)."""
    built, sizes = b.built, b.sizes
    phases = {cap: built.adapters[cap] for cap in CAPABILITIES}
    for name in MERGES:
        b.merge(name, MERGE_METHOD[name], phases, [1.0] * len(phases))
    b.train(
        "shared", built.data["train"], capability=None, lr=sizes.lr, epochs=sizes.shared_epochs,
        rank=sizes.shared_rank, per_trajectory=True,
    )  # fmt: skip
    return built


def build_full(b: Builder) -> Built:
    """Full SFT and the identity adapter it is served with (trained or reused)."""
    built, sizes = b.built, b.sizes
    train = built.data["train"]
    settings = FullSettings(
        lr=sizes.full_lr,
        epochs=sizes.full_epochs,
        seed=sizes.train_seed,
        batch=sizes.full_batch,
        dtype=sizes.train_dtype,
        pack=True,  # a trajectory's phases in one forward: the same loss on 2.5x fewer tokens
    )
    inputs = {
        "what": "full",
        "data": file_digest(train),
        "backbone": b.backbone_root,
        "settings": asdict(settings),
        "trainers": b.source,
    }

    def build(out: Path) -> None:
        run, samples = train_full_from_files(
            data=[train], backbone=b.backbone, out=out, settings=settings
        )
        b.log(f"full_sft: {samples} samples, {run.parameters} parameters, "
              f"loss {run.losses[0]:.4f} -> {run.losses[-1]:.4f}")  # fmt: skip

    full = b._get("full_sft", inputs, build)
    identity = {"what": "identity", "backbone": adapter_root(full), "trainers": b.source}
    b._get("identity", identity, lambda out: identity_adapter(full, out, "identity"))
    return built
