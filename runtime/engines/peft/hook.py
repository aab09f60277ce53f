"""The LoRA forward hook: one per targeted nn.Linear, reading one shared active-config holder.

A switch is one attribute store (`ActiveConfig.name`) read by every LoRA layer: no module
walk, no weight copy. peft's `set_adapter` walks every module instead (9-23 ms on SmolLM2).
"""

from __future__ import annotations

from typing import Any

from runtime.engine import Config


class ActiveConfig:
    """The one shared pointer every LoRA layer reads: the adapter name, or None (bare)."""

    __slots__ = ("name",)

    def __init__(self) -> None:
        self.name: Config = None


class LoraHook:
    """Forward hook of one nn.Linear: `y + scale * B(A(x))` for the holder's adapter."""

    __slots__ = ("holder", "linear", "weights")

    def __init__(self, holder: ActiveConfig) -> None:
        from torch.nn.functional import linear

        self.holder = holder
        self.linear = linear  # bound once: the hook runs on every targeted layer's forward
        self.weights: dict[str, tuple[Any, Any, float]] = {}

    def __call__(self, module: Any, args: tuple[Any, ...], output: Any) -> Any:
        lora = self.weights.get(self.holder.name)  # type: ignore[arg-type]
        if lora is None:
            return None
        a, b, scale = lora
        return output + self.linear(self.linear(args[0], a), b) * scale
