"""One episode on the vLLM engine: history, active adapter, and a pinned library.

Each `generate` is one vLLM request: the whole token history as the prompt, the active
adapter's `LoRARequest` (of the version the session pinned at its start), greedy decoding.
vLLM's automatic prefix cache, keyed by (LoRA name and path, tokens) in blocks of
`block_size` tokens, plays the part of the reference engine's per-configuration prefix
caches: returning to an adapter re-processes only what came since its last request, and
blocks of other weights are never reused, because every version has its own name.

Counters per generate: `cache_hit` is vLLM's count of prompt tokens served from its prefix
cache, `prefilled` the rest. `rebuild_s` is the share of prefill time spent re-processing
history that this session had already run through the model under another configuration;
vLLM does not time tokens separately, so it is the prefill time scaled by that share of the
prefilled tokens. The tail of the history that the active configuration itself processed
last time, past its last full cache block, is re-processed on every request with or without
a switch (vLLM caches whole blocks only): that is not a rebuild, unless the cache lost some
of that configuration's full blocks (evicted, or emptied), when all of it counts.
`prefetch(config)` sends a one-token request for the history under
`config` so that vLLM caches its blocks while an external tool call runs.

A prefetched configuration stays followed: after each generate under another configuration
the new history is prefetched under it too, in the background (during the tool call or the
agent's next step), so the switch to it re-processes only what came after the last generate.
It is followed until it becomes active or `FOLLOW_SWITCHES` switches have passed without it.
A generate under a configuration whose prefetch is still running waits for it (the prefetch
is a prefix of the prompt; run beside it, vLLM would prefill the same blocks twice); the
wait is counted in `prefill_s` and `rebuild_s`, since it is rebuilding on the critical path.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from typing import TYPE_CHECKING, Any, Protocol

from runtime.engine import Config, EngineSession, GenerationResult, ScoredBranches, SwitchRecord
from runtime.engines.vllm.names import Resident
from runtime.errors import InvalidTokensError, SessionClosedError, UnknownAdapterError

if TYPE_CHECKING:
    from runtime.engines.vllm.driver import VllmDriver

logger = logging.getLogger(__name__)

FOLLOW_SWITCHES = 2  # switches a prefetched configuration stays followed without being used


class VllmHost(Protocol):
    """What a session needs of its engine (`VllmEngine`)."""

    vocab_size: int
    tokenizer: Any
    driver: VllmDriver

    def library_snapshot(self) -> dict[str, Resident]: ...

    def forget(self, session: VllmSession) -> None: ...


class VllmSession(EngineSession):
    """One episode on a `VllmEngine`; the library is pinned when the session starts."""

    def __init__(self, engine: VllmHost) -> None:
        self._engine = engine
        self.pinned: dict[str, Resident] = engine.library_snapshot()
        self._history: list[int] = []
        self._seen = 0  # history tokens that went through the model under any configuration
        self._seen_under: dict[Config, int] = {}  # ... under each one (generates, prefetches)
        self.rebuilt_tokens = 0  # history tokens re-processed under other weights
        self._prefetches: list[Future[Any]] = []
        self._latest: dict[Config, Future[Any]] = {}  # config -> its newest prefetch
        self._following: dict[Config, int] = {}  # config -> switches left to follow it
        self.last_logprobs: tuple[dict[int, float], ...] = ()
        self._guard = threading.Lock()
        self._closed = False

    @property
    def library(self) -> Mapping[str, str]:
        """capability -> version name, fixed for the episode."""
        return {cap: r.key for cap, r in self.pinned.items()}

    def lora_request(self, config: Config) -> Any:
        """The `LoRARequest` this session uses for `config` (None: the bare backbone)."""
        return None if config is None else self.pinned[config].request

    # -- history -------------------------------------------------------------------------
    @property
    def history(self) -> Sequence[int]:
        return tuple(self._history)

    def append(self, token_ids: Sequence[int]) -> None:
        self._check_open()
        ids = list(token_ids)
        vocab = self._engine.vocab_size
        bad = [t for t in ids if type(t) is not int or not 0 <= t < vocab]
        if bad:
            raise InvalidTokensError(f"token ids outside the vocabulary [0, {vocab}): {bad[:5]}")
        self._history.extend(ids)

    # -- generation ----------------------------------------------------------------------
    def generate(
        self,
        max_new_tokens: int,
        stop_ids: Sequence[int] = (),
        on_token: Callable[[int], None] | None = None,
        logprobs: int | None = None,
    ) -> GenerationResult:
        """Greedy decode under the active configuration; the new tokens join the history.

        `logprobs=k` also returns vLLM's top-k logprobs per position in `self.last_logprobs`.
        """
        self._check_open()
        if max_new_tokens < 1:
            raise InvalidTokensError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if not self._history:
            raise InvalidTokensError("the history is empty: append a prompt before generating")
        waited = self._wait_own_prefetch()
        prompt = list(self._history)
        done = self._engine.driver.generate(
            prompt, self.lora_request(self._active), max_new_tokens, stop_ids, on_token, logprobs
        )
        self.last_logprobs = done.logprobs
        self._history.extend(done.token_ids)
        prefilled = done.prompt_tokens - done.cached_tokens
        rebuilt = rebuilt_tokens(
            self._seen, self._seen_under.get(self._active, 0), done.prompt_tokens,
            done.cached_tokens, self._engine.driver.block_size,
        )  # fmt: skip
        self.rebuilt_tokens += rebuilt
        self._seen = max(self._seen, len(self._history) - 1)
        with self._guard:
            self._seen_under[self._active] = len(self._history) - 1
        rebuild_s = waited + (done.first_token_s * rebuilt / prefilled if prefilled else 0.0)
        self._follow()
        text = self._text(done.token_ids)
        return GenerationResult(
            done.token_ids, text, done.finish_reason, prefilled, len(done.token_ids),
            waited + done.first_token_s, done.total_s - done.first_token_s, rebuild_s,
            done.cached_tokens,
        )  # fmt: skip

    def score_branches(
        self,
        contexts: Sequence[Sequence[int]],
        wanted: Mapping[tuple[int, ...], Sequence[int]],
    ) -> ScoredBranches:
        """Teacher forced on vLLM: for each context and each prefix of `wanted`, one 1-token
        request for context + prefix that reports the raw logprobs of the wanted tokens
        (`logprob_token_ids`: computed from the logits before any mask or penalty, vLLM's
        default `logprobs_mode`; `prompt_logprobs` would score whole options in one request
        each, but vLLM's CPU LoRA path fails on it: "logits rows outnumber the sampler's
        LoRA indices"). All requests are in flight at once; vLLM batches them and its prefix
        cache serves the shared context.

        A rebuild, as for `generate`: history that other weights ran since the active
        configuration last scored or generated, counted in each request (each rotated
        context re-processes it too). Afterwards the history counts as run under the active
        configuration, so the adapter loaded next rebuilds what the choice ran."""
        self._check_open()
        driver, lora = self._engine.driver, self.lora_request(self._active)
        seen, own = self._seen, self._seen_under.get(self._active, 0)
        start = time.perf_counter()
        futures = [
            driver.submit(driver.agenerate([*c, *prefix], lora, 1, scored=tokens))
            for c in contexts
            for prefix, tokens in wanted.items()
        ]
        wait_futures(futures)
        done = iter([f.result() for f in futures])
        logprobs, prefilled, cached, rebuilt = [], 0, 0, 0
        for _ in contexts:
            table = {}
            for prefix, tokens in wanted.items():
                completion = next(done)
                table[prefix] = {t: completion.logprobs[0][t] for t in tokens}
                prefilled += completion.prompt_tokens - completion.cached_tokens
                cached += completion.cached_tokens
                rebuilt += rebuilt_tokens(
                    seen, own, completion.prompt_tokens, completion.cached_tokens,
                    driver.block_size,
                )  # fmt: skip
            logprobs.append(table)
        seconds = time.perf_counter() - start
        self.rebuilt_tokens += rebuilt
        self._seen = max(self._seen, len(self._history))
        with self._guard:
            ran = self._seen_under.get(self._active, 0)
            self._seen_under[self._active] = max(ran, len(self._history))
        rebuild_s = seconds * rebuilt / prefilled if prefilled else 0.0
        return ScoredBranches(logprobs, prefilled, seconds, cached, rebuild_s)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self._text(ids)

    def _wait_own_prefetch(self) -> float:
        """Seconds spent waiting for a running prefetch under the active configuration."""
        with self._guard:
            pending = self._latest.get(self._active)
        if pending is None or pending.done():
            return 0.0
        start = time.perf_counter()
        wait_futures([pending])
        return time.perf_counter() - start

    def _follow(self) -> None:
        """Prefetch the history under every followed configuration (in the background)."""
        with self._guard:
            followed = [c for c in self._following if c != self._active]
        for config in followed:
            self._submit_prefetch(config)

    def _switched(self, record: SwitchRecord) -> SwitchRecord:
        with self._guard:
            self._following = {
                c: left - 1
                for c, left in self._following.items()
                if left > 1 and c != record.to_config
            }
        return record

    def _text(self, ids: Sequence[int]) -> str:
        tok = self._engine.tokenizer
        return tok.decode(list(ids), skip_special_tokens=False) if tok is not None else ""

    # -- prefetch ------------------------------------------------------------------------
    def prefetch(self, config: Config) -> None:
        """Warm vLLM's prefix cache with the history under `config` (returns at once)."""
        self._check_open()
        if config is not None and config not in self.pinned:
            raise UnknownAdapterError(config, sorted(self.pinned))
        if config != self._active:
            with self._guard:
                self._following[config] = FOLLOW_SWITCHES
        if self._history:
            self._submit_prefetch(config)

    def _submit_prefetch(self, config: Config) -> None:
        driver = self._engine.driver
        coro = driver.agenerate(list(self._history), self.lora_request(config), 1)
        future = driver.submit(coro)
        future.add_done_callback(_log_failure)
        with self._guard:
            self._seen_under[config] = max(self._seen_under.get(config, 0), len(self._history))
            self._prefetches = [f for f in self._prefetches if not f.done()] + [future]
            self._latest[config] = future

    def wait_prefetch(self, timeout: float | None = None) -> None:
        """Block until every started prefetch has finished (tests, benchmarks)."""
        with self._guard:
            pending = list(self._prefetches)
        wait_futures(pending, timeout)

    # -- lifecycle -----------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError("session is closed")

    def close(self) -> None:
        self._closed = True
        with self._guard:
            self._following.clear()
        self.wait_prefetch()
        self._engine.forget(self)


def rebuilt_tokens(seen: int, own: int, prompt: int, cached: int, block_size: int) -> int:
    """Prompt tokens re-processed because another configuration ran since this one did.

    `seen`: history tokens the session ran under any configuration; `own`: under this one;
    `cached`: prompt tokens vLLM served from its cache. Re-processing this configuration's
    own tail past its last full block is what every request pays, switch or not; while the
    cache still holds this configuration's full blocks, only what came after `own` is a
    rebuild. Once the cache lost some of them (evicted, or emptied at a switch), all is.
    """
    kept_own = cached >= own - own % block_size
    start = max(cached, own) if kept_own else cached
    return max(0, min(seen, prompt) - start)


def _log_failure(future: Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.warning("prefetch failed: %s", future.exception())
