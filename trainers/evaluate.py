"""Masked NLL per capability on held-out phase samples.

Each capability's samples are scored with the adapter assigned to it (its own adapter, a
merged one, a shared one) or, with none assigned, by the bare backbone. The score is the
mean negative log-likelihood per supervised token (the same mask as training).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainers.errors import AdapterSpecError
from trainers.lora import load_backbone
from trainers.loss import masked_nll
from trainers.phases import PhaseSample


@dataclass(frozen=True)
class NllScore:
    capability: str
    adapter: str | None
    nll_sum: float
    tokens: int
    samples: int
    # per sample ("<trajectory>#<phase>"): mean NLL per supervised token (for paired tests)
    items: dict[str, float] = field(default_factory=dict, compare=False)

    @property
    def mean(self) -> float:
        return self.nll_sum / self.tokens if self.tokens else float("nan")

    def to_json(self) -> dict[str, Any]:
        return {
            "capability": self.capability,
            "adapter": self.adapter,
            "nll": self.mean,
            "tokens": self.tokens,
            "samples": self.samples,
        }


def _load(backbone: str | os.PathLike[str], dirs: Sequence[Path]) -> tuple[Any, dict[Path, str]]:
    """The backbone with every distinct adapter directory loaded under a name of its own."""
    from peft import PeftModel

    model = load_backbone(backbone)
    names: dict[Path, str] = {}
    for n, path in enumerate(dict.fromkeys(Path(d).resolve() for d in dirs)):
        if not (path / "adapter_config.json").is_file():
            raise AdapterSpecError(f"{path} has no adapter_config.json")
        names[path] = f"eval{n}"
        if n == 0:
            model = PeftModel.from_pretrained(model, str(path), adapter_name=names[path])
        else:
            model.load_adapter(str(path), adapter_name=names[path])
    model.eval()
    return model, names


def item_key(sample: PhaseSample) -> str:
    return f"{sample.trajectory}#{sample.phase}"


def _score(model: Any, samples: Sequence[PhaseSample]) -> tuple[float, int, dict[str, float]]:
    import torch

    total, tokens, items = 0.0, 0, {}
    with torch.no_grad():
        for sample in samples:
            nll, count = masked_nll(model, sample)
            total += float(nll)
            tokens += count
            if count:
                items[item_key(sample)] = float(nll) / count
    return total, tokens, items


def evaluate_nll(
    *,
    backbone: str | os.PathLike[str],
    samples: Sequence[PhaseSample],
    assignment: Mapping[str, Path | None],
    default: Path | None = None,
) -> dict[str, NllScore]:
    """{capability: score}; capability c uses `assignment.get(c, default)` (None: backbone)."""
    caps = sorted({s.capability for s in samples})
    chosen = {c: assignment.get(c, default) for c in caps}
    model, names = _load(backbone, [d for d in chosen.values() if d is not None])
    scores = {}
    for cap in caps:
        group = [s for s in samples if s.capability == cap]
        path = chosen[cap]
        if path is None:
            if names:
                with model.disable_adapter():
                    total, tokens, items = _score(model, group)
            else:
                total, tokens, items = _score(model, group)
        else:
            model.set_adapter(names[Path(path).resolve()])
            total, tokens, items = _score(model, group)
        scores[cap] = NllScore(cap, str(path) if path else None, total, tokens, len(group), items)
    return scores
