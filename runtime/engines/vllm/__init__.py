"""The vLLM engine: every adapter of the library resident as a LoRA, one request per step.

One module per concept, as `runtime.engines.peft`:

- `driver`: `VllmDriver` (one `AsyncLLM`, its event-loop thread, blocking and async
  generate for callers on any thread) and `import_vllm` with its install hint;
- `names`: `LoraNames` (every adapter under its version name, integer ids never reused)
  and `Resident` (what a session's library maps each capability to);
- `engine`: `VllmEngine` (library resident, batch validation then load, swaps, audit) and
  the sizing helpers (`kv_cache_bytes`, `fitting_rank`, `use_every_core`);
- `session`: `VllmSession` (one episode: token history, the active adapter, prefetch);
- `cpu_lora`: the `vllm.general_plugins` entry point that groups the CPU build's LoRA
  matmuls by adapter.

Importing this package loads no vLLM (nor torch); `VllmEngine(...)` imports vLLM on use.
"""

from runtime.engines.vllm.driver import INSTALL_HINT, VllmDriver, import_vllm
from runtime.engines.vllm.engine import (
    VllmEngine,
    fitting_rank,
    kv_cache_bytes,
    use_every_core,
)
from runtime.engines.vllm.names import LoraName, LoraNames, Resident
from runtime.engines.vllm.session import VllmSession

__all__ = [
    "INSTALL_HINT",
    "LoraName",
    "LoraNames",
    "Resident",
    "VllmDriver",
    "VllmEngine",
    "VllmSession",
    "fitting_rank",
    "import_vllm",
    "kv_cache_bytes",
    "use_every_core",
]
