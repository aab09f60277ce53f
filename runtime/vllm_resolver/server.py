"""The plugin inside vLLM's OpenAI API server process: resolver, name guard, follower.

- `make_resolver`: vLLM's `LoRAResolver` over `RegistrySource`; every LoRA is registered
  under its version name (`write@7`, what vLLM's prefix cache and the integrity check key
  on), whatever name the client asked for.
- `install`: wraps `OpenAIServingModels` so that the plugin holds the server's table of
  served names (to drop names the registry no longer backs, `ServerHooks.drop`) and
  `/v1/load_lora_adapter` refuses registry-shaped names and paths in the plugin's library
  (`names.squat_refusal`, 403). The follower starts with the first `OpenAIServingModels`,
  so only in the API server process.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Mapping
from http import HTTPStatus
from pathlib import Path
from typing import Any

import httpx

from registry.errors import RegistryError
from runtime.vllm_resolver.log import get_logger
from runtime.vllm_resolver.names import squat_refusal
from runtime.vllm_resolver.policy import ServedName
from runtime.vllm_resolver.served import ServedTable
from runtime.vllm_resolver.source import RegistrySource, ResolveRefused

logger = get_logger(__name__)
DROP_TIMEOUT_S = 10.0


def make_resolver(source: RegistrySource, table: ServedTable) -> Any:
    """A vLLM `LoRAResolver` over `source` (vLLM imported here, on use)."""
    from vllm.lora.request import LoRARequest
    from vllm.lora.resolver import LoRAResolver

    class RegistryLoRAResolver(LoRAResolver):  # type: ignore[misc]
        async def resolve_lora(self, base_model_name: str, lora_name: str) -> Any:
            if not source.owns(lora_name):
                return None
            try:
                binding, path = await asyncio.to_thread(source.resolve, base_model_name, lora_name)
            except (ResolveRefused, RegistryError, httpx.HTTPError, OSError) as exc:
                logger.error("refusing LoRA %r from the registry: %s", lora_name, exc)
                return None
            table.add(binding)
            logger.info("LoRA %r resolved to %s, verified, at %s", lora_name, binding.version, path)
            # vLLM replaces the integer id with its own counter
            return LoRARequest(lora_name=binding.version, lora_int_id=1, lora_path=str(path))

    return RegistryLoRAResolver()


class ServerHooks:
    """The plugin's handle on vLLM's `OpenAIServingModels` and the server's event loop."""

    def __init__(self, library_dir: Path, on_attach: Callable[[], None]) -> None:
        self.library_dir = Path(library_dir)
        self.on_attach = on_attach
        self._models: weakref.ref[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def attach(self, models: Any) -> None:
        first = self._models is None
        self._models = weakref.ref(models)
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        if first:
            self.on_attach()

    def loaded(self) -> set[str]:
        models = self._models() if self._models else None
        return set(models.lora_requests) if models is not None else set()

    def drop(self, bindings: Mapping[str, ServedName]) -> None:
        """Remove the names from vLLM's served table (each only while bound as given)."""
        models = self._models() if self._models else None
        if models is None or self._loop is None:
            return
        future = asyncio.run_coroutine_threadsafe(_drop(models, bindings), self._loop)
        future.result(DROP_TIMEOUT_S)

    def refusal(self, lora_name: str, lora_path: str) -> Any:
        """vLLM's 403 answer for a load the plugin does not allow, else None."""
        why = squat_refusal(lora_name, lora_path, self.library_dir)
        if why is None:
            return None
        from vllm.entrypoints.serve import create_error_response

        logger.warning("refusing /v1/load_lora_adapter: %s", why)
        return create_error_response(
            message=why, err_type="Forbidden", status_code=HTTPStatus.FORBIDDEN
        )


async def _drop(models: Any, bindings: Mapping[str, ServedName]) -> None:
    for name, bound in bindings.items():
        async with models.lora_resolver_lock[name]:
            current = models.lora_requests.get(name)
            if current is not None and current.lora_name == bound.version:
                del models.lora_requests[name]


def install(hooks: ServerHooks) -> None:
    """Wrap `OpenAIServingModels` (construction and `load_lora_adapter`); idempotent."""
    from vllm.entrypoints.openai.models.serving import OpenAIServingModels

    if getattr(OpenAIServingModels, "_weact_hooks", None) is not None:
        OpenAIServingModels._weact_hooks = hooks
        return
    init, load = OpenAIServingModels.__init__, OpenAIServingModels.load_lora_adapter

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        OpenAIServingModels._weact_hooks.attach(self)

    async def load_lora_adapter(self: Any, request: Any, base_model_name: str | None = None) -> Any:
        refused = OpenAIServingModels._weact_hooks.refusal(
            str(request.lora_name or ""), str(request.lora_path or "")
        )
        return refused or await load(self, request, base_model_name)

    OpenAIServingModels.__init__ = __init__
    OpenAIServingModels.load_lora_adapter = load_lora_adapter
    OpenAIServingModels._weact_hooks = hooks
