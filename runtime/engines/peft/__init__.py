"""The reference engine: a transformers backbone with every adapter of a library resident.

One module per concept:

- `hook`: `ActiveConfig` (the one shared pointer every LoRA layer reads) and `LoraHook` (the
  forward hook of one nn.Linear: `y + scale * B(A(x))` for the holder's adapter);
- `adapters`: PEFT adapter directories, checked by `storage.lora` against the model's
  nn.Linear shapes (the registry's rules and messages) and loaded by torch;
- `backbone`: the resident backbone's tensors under its files' names, for the audit;
- `engine`: `PeftEngine` (library resident, batch validation then apply, swaps, audit);
- `session`: `PeftSession` (one episode: history, per-configuration prefix caches, prefetch
  in the background while an external tool call is in flight).
"""

from runtime.engines.peft.adapters import (
    CONFIG_FILE,
    WEIGHTS_FILE,
    LoadedAdapter,
    linear_shapes,
    read_adapter,
    weight_key,
)
from runtime.engines.peft.engine import PeftEngine
from runtime.engines.peft.hook import ActiveConfig, LoraHook
from runtime.engines.peft.session import (
    PREFETCH_CHUNK,
    PREFILL_CHUNK,
    PeftSession,
    PrefetchRecord,
    Prefill,
)

__all__ = [
    "CONFIG_FILE",
    "PREFETCH_CHUNK",
    "PREFILL_CHUNK",
    "WEIGHTS_FILE",
    "ActiveConfig",
    "LoadedAdapter",
    "LoraHook",
    "PeftEngine",
    "PeftSession",
    "PrefetchRecord",
    "Prefill",
    "linear_shapes",
    "read_adapter",
    "weight_key",
]
