"""How adapters are named inside vLLM: version names that never refer to two sets of weights.

vLLM keys its prefix cache by the LoRA name (vLLM issues #30931, #42125): a name reused for
new weights would serve cached blocks of the old ones. Each version gets its name
(`write@7`, else `<capability>@<root prefix>`) and an integer id unique for the engine's
lifetime; `Resident` is a version loaded into vLLM with the request that selects it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime.engine import AdapterSpec
from runtime.errors import AdapterLoadError


@dataclass(frozen=True)
class LoraName:
    name: str  # "write@7": what vLLM sees and keys its prefix cache by
    int_id: int  # vLLM's lora_int_id, unique for the engine's lifetime
    root: str


class LoraNames:
    """Version names and integer ids for vLLM; a name never refers to two sets of weights."""

    def __init__(self) -> None:
        self._by_name: dict[str, LoraName] = {}
        self._next_id = 1

    def check(self, spec: AdapterSpec, root: str) -> str | None:
        """The problem with serving `spec` (weights `root`) under its name, or None."""
        known = self._by_name.get(self.name_of(spec, root))
        if known is not None and known.root != root:
            return (
                f"{known.name!r} already names weights {known.root}; new weights {root} need "
                "a new version name (vLLM would serve stale cached blocks otherwise)"
            )
        return None

    def assign(self, spec: AdapterSpec, root: str) -> LoraName:
        problem = self.check(spec, root)
        if problem:
            raise AdapterLoadError(problem)
        name = self.name_of(spec, root)
        if name not in self._by_name:
            self._by_name[name] = LoraName(name, self._next_id, root)
            self._next_id += 1
        return self._by_name[name]

    @staticmethod
    def name_of(spec: AdapterSpec, root: str) -> str:
        return spec.version or f"{spec.name}@{root[:12]}"


@dataclass(frozen=True)
class Resident:
    """An adapter version loaded into vLLM: its spec, vLLM name/id and request."""

    spec: AdapterSpec
    lora: LoraName
    request: Any  # vllm.lora.request.LoRARequest

    @property
    def key(self) -> str:
        return self.lora.name
