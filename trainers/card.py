"""The model card (`README.md`) `weact train` writes beside an adapter, from its training.json.

Markdown a person reads on the adapter's page and in `weact adapter show`: what it was trained
for, on which backbone (path and manifest root), from which data (each file's sha256), with
which hyper-parameters, and the masked-token NLL measured while training (first step, last
step, and the mean over the last epoch's steps). The registry keeps it as text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

CARD_FILE = "README.md"


def _nll(losses: Sequence[float], steps_per_epoch: int) -> list[str]:
    if not losses:
        return ["- no training step ran"]
    last = losses[-steps_per_epoch:] if steps_per_epoch > 0 else losses
    return [
        f"- first step: {losses[0]:.4f}",
        f"- last step: {losses[-1]:.4f}",
        f"- mean over the last epoch ({len(last)} steps): {sum(last) / len(last):.4f}",
    ]


def model_card(meta: Mapping[str, Any], base: str) -> str:
    """The card of an adapter from its training.json `meta` and the backbone path `base`."""
    name = str(meta.get("adapter", "adapter"))
    settings = dict(meta.get("settings") or {})
    epochs = int(settings.get("epochs") or 1)
    steps = int(meta.get("steps") or 0)
    data = list(meta.get("data") or [])
    lines = [
        f"# {name} (LoRA adapter)",
        "",
        f"Trained by `weact train` for the `{name}` capability on {meta.get('samples', 0)} "
        f"samples ({steps} steps); its samples supervise: "
        f"{', '.join(meta.get('covered') or []) or 'nothing'}.",
        "",
        "## Base",
        "",
        f"- backbone: `{base}`",
        f"- manifest root: `{meta.get('backbone_root')}`",
        "",
        "## Data",
        "",
        *(f"- `{d.get('path')}` sha256 `{d.get('sha256')}`" for d in data),
        *([] if data else ["- not recorded"]),
        "",
        "## Hyper-parameters",
        "",
        *(f"- {key}: `{value}`" for key, value in sorted(settings.items())),
        "",
        "## Measured NLL (masked tokens, while training)",
        "",
        *_nll(list(meta.get("losses") or []), steps // epochs if epochs else steps),
        "",
    ]
    return "\n".join(lines)
