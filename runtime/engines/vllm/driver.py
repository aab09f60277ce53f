"""vLLM's `AsyncLLM` on an event loop of its own, callable from any thread.

The engine seam is synchronous (`EngineSession.generate` blocks; the agent loop calls it
from a worker thread per episode), while vLLM batches only the requests that are in flight
together. `VllmDriver` bridges the two: it owns one `AsyncLLM` (whose engine core runs in a
separate process) and an asyncio loop on a daemon thread. `generate` may be called from many
threads at once; each call becomes one vLLM request, so concurrent episodes decode in the
same batches. New tokens are handed back to the calling thread as they arrive, so an
`on_token` callback runs on the caller's thread, as with the reference engine.

Asynchronous callers (an evaluation runner driving many episodes from one event loop) use
`agenerate`, which runs on the driver's loop and can be awaited from any other loop.
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from runtime.errors import InvalidTokensError, VllmRequestError

logger = logging.getLogger(__name__)

INSTALL_HINT = (
    "VllmEngine needs vLLM: pip install 'weact[vllm]' on a CUDA node, or `make venv-vllm` "
    "for vLLM's CPU build"
)
T = TypeVar("T")
_DONE = object()


def import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return vllm


@dataclass(frozen=True)
class Completion:
    """One finished request: greedy tokens, cache use and timing."""

    token_ids: tuple[int, ...]
    finish_reason: str  # "stop" (a stop id) or "length"
    prompt_tokens: int
    cached_tokens: int  # prompt tokens served from vLLM's prefix cache
    first_token_s: float  # submit -> first token: queueing plus prefill
    total_s: float
    # per generated position: {token id: logprob} of the top candidates (when asked for)
    logprobs: tuple[dict[int, float], ...] = field(default=())


class VllmDriver:
    """One AsyncLLM, its event loop thread, and blocking/async generate for any caller."""

    def __init__(self, **engine_args: Any) -> None:
        import_vllm()
        self.in_flight = 0  # requests submitted to vLLM and not finished (loop thread only)
        self.max_in_flight = 0  # the most at once so far: how much vLLM could batch
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="weact-vllm-loop", daemon=True
        )
        self._thread.start()
        try:
            self.llm = self.call(self._start(engine_args))
        except BaseException:
            self._stop_loop()
            raise
        # tokens per KV block (as vLLM resolved it): its prefix cache holds whole blocks only
        self.block_size = int(self.llm.vllm_config.cache_config.block_size)
        atexit.register(self.close)  # never leave vLLM's engine core running without us

    @staticmethod
    async def _start(engine_args: dict[str, Any]) -> Any:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        return AsyncLLM.from_engine_args(AsyncEngineArgs(**engine_args))

    # -- calls onto the loop ----------------------------------------------------------------
    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the driver's loop and wait for its result (from any other thread)."""
        return self.submit(coro).result(timeout)

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def add_lora(self, request: Any) -> bool:
        return bool(self.call(self.llm.add_lora(request)))

    def remove_lora(self, int_id: int) -> bool:
        return bool(self.call(self.llm.remove_lora(int_id)))

    def list_loras(self) -> set[int]:
        return set(self.call(self.llm.list_loras()))

    def reset_prefix_cache(self) -> bool:
        return bool(self.call(self.llm.reset_prefix_cache()))

    # -- generation -------------------------------------------------------------------------
    def generate(
        self,
        prompt_ids: Sequence[int],
        lora: Any,
        max_tokens: int,
        stop_ids: Sequence[int] = (),
        on_token: Callable[[int], None] | None = None,
        logprobs: int | None = None,
    ) -> Completion:
        """Greedy decode, blocking the calling thread; `on_token` runs on that thread."""
        tokens: queue.SimpleQueue[Any] = queue.SimpleQueue()
        future = self.submit(
            self.agenerate(prompt_ids, lora, max_tokens, stop_ids, tokens.put, logprobs)
        )
        future.add_done_callback(lambda _: tokens.put(_DONE))
        while (item := tokens.get()) is not _DONE:
            if on_token is not None:
                on_token(item)
        return future.result()

    async def agenerate(
        self,
        prompt_ids: Sequence[int],
        lora: Any,
        max_tokens: int,
        stop_ids: Sequence[int] = (),
        on_token: Callable[[int], None] | None = None,
        logprobs: int | None = None,
        scored: Sequence[int] | None = None,
    ) -> Completion:
        """Greedy decode as one vLLM request; must run on the driver's loop (see `submit`).
        `scored`: token ids whose logprobs each position reports (`logprob_token_ids`; raw,
        i.e. log-softmax of the model's logits before any mask or penalty, vLLM's default
        `logprobs_mode`)."""
        from vllm import SamplingParams
        from vllm.exceptions import VLLMClientError
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        params = SamplingParams(
            temperature=0.0,
            max_tokens=max_tokens,
            stop_token_ids=list(stop_ids),
            ignore_eos=True,  # like the reference engine: only the caller's stop ids stop
            detokenize=False,
            logprobs=logprobs,
            logprob_token_ids=list(scored) if scored is not None else None,
            output_kind=RequestOutputKind.DELTA,
        )
        prompt = TokensPrompt(prompt_token_ids=list(prompt_ids))
        start, first = time.perf_counter(), None
        ids: list[int] = []
        tops: list[dict[int, float]] = []
        finish, cached = "length", 0
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            stream = self.llm.generate(prompt, params, uuid.uuid4().hex, lora_request=lora)
            async for out in stream:
                first = first or time.perf_counter()
                completion = out.outputs[0]
                for token in completion.token_ids:
                    ids.append(token)
                    if on_token is not None:
                        on_token(token)
                tops.extend(_top(p) for p in completion.logprobs or ())
                cached = int(out.num_cached_tokens or 0)
                finish = "stop" if completion.finish_reason == "stop" else "length"
        except (VLLMClientError, ValueError) as exc:  # e.g. a prompt over max_model_len
            raise InvalidTokensError(f"vLLM refused the request: {exc}") from exc
        except Exception as exc:
            raise VllmRequestError(f"vLLM request failed: {exc}") from exc
        finally:
            self.in_flight -= 1
        end = time.perf_counter()
        return Completion(
            tuple(ids), finish, len(prompt_ids), cached, (first or end) - start, end - start,
            tuple(tops),
        )  # fmt: skip

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        """Shut vLLM's engine core down and stop the loop thread (idempotent)."""
        llm = self.__dict__.pop("llm", None)
        if llm is not None:
            try:
                llm.shutdown()
            finally:
                del llm
                gc.collect()  # AsyncLLM.__del__ must run while its modules are still alive
        self._stop_loop()

    def _stop_loop(self) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        if not self._loop.is_running() and not self._loop.is_closed():
            self._loop.close()


def _top(position: Any) -> dict[int, float]:
    """vLLM's {token id: Logprob} at one position -> {token id: logprob}."""
    return {int(token): float(lp.logprob) for token, lp in position.items()}
