"""vLLM engine: multi-LoRA serving with `LoRARequest`, in-process. UNTESTED ON CPU.

vLLM is CUDA-only (the `[vllm]` extra, in its own environment: it pins its own torch and
transformers). Nothing here runs in this project's CPU test suite except the naming rules
(`LoraNames`) and the lazy import; treat the engine as a skeleton to finish on a GPU node.

Adapter names: vLLM keys its prefix cache by the LoRA *name*, so reloading new weights under
an old name can serve stale KV blocks (vLLM issues #30931, #42125). Every adapter is therefore
registered under its version name (`write@7`), and a name is never reused for other weights:
`LoraNames` refuses a second manifest root under a known name and never hands out an integer
id twice. vLLM's automatic prefix caching, keyed by (LoRA, tokens), plays the part of the
reference engine's per-configuration prefix caches; `prefetch` warms it with a 1-token request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.engine import (
    AdapterSpec,
    AuditReport,
    Config,
    Engine,
    EngineSession,
    GenerationResult,
)
from runtime.errors import (
    AdapterLoadError,
    InvalidTokensError,
    SessionClosedError,
    UnknownAdapterError,
)

INSTALL_HINT = "VllmEngine needs vLLM on a CUDA machine: pip install 'weact[vllm]'"


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return vllm


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

    def assign(self, spec: AdapterSpec, root: str) -> LoraName:
        name = spec.version or f"{spec.name}@{root[:12]}"
        known = self._by_name.get(name)
        if known is not None:
            if known.root != root:
                raise AdapterLoadError(
                    f"{name!r} already names weights {known.root}; new weights {root} need a "
                    "new version name (vLLM would serve stale cached blocks otherwise)"
                )
            return known
        entry = LoraName(name, self._next_id, root)
        self._next_id += 1
        self._by_name[name] = entry
        return entry


class VllmEngine(Engine):
    """vLLM `LLM` with LoRA enabled; adapters addressed by version name. UNTESTED ON CPU."""

    def __init__(
        self,
        backbone: str,
        adapters: Iterable[AdapterSpec] = (),
        *,
        max_lora_rank: int = 64,
        **llm_options: Any,
    ) -> None:
        vllm = _import_vllm()
        from runtime.models import load_tokenizer

        specs = list(adapters)
        self._llm = vllm.LLM(
            model=backbone,
            enable_lora=True,
            max_loras=max(1, len(specs)),
            max_lora_rank=max_lora_rank,
            enable_prefix_caching=True,
            **llm_options,
        )
        self.tokenizer = load_tokenizer(backbone)
        self.backbone_dir = Path(backbone)
        self._names = LoraNames()
        self._specs: dict[str, AdapterSpec] = {}
        self._requests: dict[str, Any] = {}
        self._roots: dict[str, str] = {}
        self.add_adapters(specs)

    @property
    def adapters(self) -> Mapping[str, AdapterSpec]:
        return dict(self._specs)

    def add_adapters(self, specs: Iterable[AdapterSpec]) -> None:
        """Check every file's manifest first, then register LoRARequests for all."""
        from vllm.lora.request import LoRARequest

        from storage.manifest import manifest_of_file

        specs, problems, roots = list(specs), [], {}
        for spec in specs:
            root = manifest_of_file(Path(spec.path) / "adapter_model.safetensors").root
            if spec.manifest_root not in (None, root):
                problems.append(f"{spec.name}: manifest root {root} != {spec.manifest_root}")
            roots[spec.name] = root
        if problems:
            raise AdapterLoadError("; ".join(problems))
        for spec in specs:
            lora = self._names.assign(spec, roots[spec.name])
            self._requests[spec.name] = LoRARequest(lora.name, lora.int_id, spec.path)
            self._specs[spec.name] = spec
            self._roots[spec.name] = roots[spec.name]

    def request(self, config: Config) -> Any:
        return None if config is None else self._requests[config]

    def complete(
        self, ids: Sequence[int], config: Config, max_tokens: int, stops: Sequence[int]
    ) -> Any:
        vllm = _import_vllm()
        params = vllm.SamplingParams(temperature=0.0, max_tokens=max_tokens, stop_token_ids=stops)
        prompt = vllm.inputs.TokensPrompt(prompt_token_ids=list(ids))
        out = self._llm.generate([prompt], params, lora_request=self.request(config))
        return out[0]

    def new_session(self) -> VllmSession:
        return VllmSession(self)

    def audit(self) -> AuditReport:
        """Roots of the adapter files vLLM loaded. vLLM (V1) keeps weights in a worker
        process, so resident memory is not read here: the report says so."""
        from storage.manifest import manifest_of_file, manifest_of_path

        roots = {
            n: manifest_of_file(Path(s.path) / "adapter_model.safetensors").root
            for n, s in self._specs.items()
        }
        bad = [n for n, r in roots.items() if r != self._roots[n]]
        detail = "recomputed from files, not device memory (vLLM)"
        if bad:
            detail += f"; changed since load: {', '.join(bad)}"
        return AuditReport(not bad, manifest_of_path(self.backbone_dir).root, roots, detail)


class VllmSession(EngineSession):
    """One episode on vLLM; the history is re-sent and vLLM's prefix cache reuses blocks."""

    def __init__(self, engine: VllmEngine) -> None:
        self._engine = engine
        self._history: list[int] = []
        self._closed = False

    @property
    def library(self) -> Mapping[str, AdapterSpec]:
        return self._engine.adapters

    @property
    def history(self) -> Sequence[int]:
        return tuple(self._history)

    def append(self, token_ids: Sequence[int]) -> None:
        self._check_open()
        self._history.extend(token_ids)

    def generate(
        self,
        max_new_tokens: int,
        stop_ids: Sequence[int] = (),
        on_token: Callable[[int], None] | None = None,
    ) -> GenerationResult:
        self._check_open()
        if not self._history:
            raise InvalidTokensError("the history is empty: append a prompt before generating")
        start = time.perf_counter()
        out = self._engine.complete(self._history, self._active, max_new_tokens, stop_ids)
        seconds = time.perf_counter() - start
        completion = out.outputs[0]
        ids = tuple(completion.token_ids)
        for token in ids:
            self._history.append(token)
            if on_token is not None:
                on_token(token)
        cached = int(getattr(out, "num_cached_tokens", 0) or 0)
        prompt = len(out.prompt_token_ids)
        finish = "stop" if completion.finish_reason == "stop" else "length"
        return GenerationResult(
            ids, completion.text, finish, prompt - cached, len(ids), 0.0, seconds, 0.0, cached
        )

    def prefetch(self, config: Config) -> None:
        self._check_open()
        if config is not None and config not in self._engine.adapters:
            raise UnknownAdapterError(config, sorted(self._engine.adapters))
        ids = list(self._history)
        if ids:
            threading.Thread(
                target=self._engine.complete, args=(ids, config, 1, ()), daemon=True
            ).start()

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError("session is closed")

    def close(self) -> None:
        self._closed = True
