"""Engine backends, chosen by name from one table and imported on first use.

`import runtime.engines` loads neither torch nor vLLM: `PeftEngine` and `VllmEngine` resolve
through the module `__getattr__`, and `engine_class("vllm")` fails with an install hint when
the optional `[vllm]` extra is missing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.engines.peft import PeftEngine
    from runtime.engines.vllm import VllmEngine

__all__ = ["ENGINES", "PeftEngine", "VllmEngine", "engine_class"]

# name -> (module, class, pip extra that provides its dependencies)
ENGINES: dict[str, tuple[str, str, str]] = {
    "peft": ("runtime.engines.peft", "PeftEngine", "runtime"),
    "vllm": ("runtime.engines.vllm", "VllmEngine", "vllm"),
}


def engine_class(kind: str) -> Any:
    """The engine class registered under `kind` ("peft" or "vllm")."""
    try:
        module, cls, _ = ENGINES[kind]
    except KeyError:
        raise ValueError(f"unknown engine {kind!r}; known: {', '.join(ENGINES)}") from None
    return getattr(importlib.import_module(module), cls)


def __getattr__(name: str) -> Any:
    for kind, (_, cls, _) in ENGINES.items():
        if cls == name:
            return engine_class(kind)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
