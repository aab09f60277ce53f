"""One episode on the PEFT engine: history, active configuration, per-config prefix caches.

Forward passes go through the engine (`PeftEngine.run`), which holds one lock around each so
that concurrent sessions interleave token by token. Prefetch runs in a background thread in
small chunks, only while no generate is in progress (an external tool call in flight), and
stops as soon as foreground work starts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from runtime.engine import Config, EngineSession, GenerationResult, ScoredBranches
from runtime.errors import InvalidTokensError, SessionClosedError, UnknownAdapterError
from runtime.kvcache import CacheEntry, PrefixCacheStore, crop, new_entry

logger = logging.getLogger(__name__)

PREFILL_CHUNK = 512  # tokens per forward in a foreground prefill, so sessions interleave
PREFETCH_CHUNK = 32  # tokens per background forward: foreground work waits at most one


class SessionHost(Protocol):
    """The engine as its sessions use it (`PeftEngine`; a protocol keeps the import one-way)."""

    model: Any
    tokenizer: Any
    vocab_size: int
    epoch: int
    _library: dict[str, str]  # capability -> weight key: what a new session pins
    _sessions: Any  # the open sessions (a WeakSet); close() leaves it

    def run(
        self,
        config: Config,
        entry: CacheEntry,
        token_ids: Sequence[int],
        background_epoch: int | None = None,
    ) -> Any: ...

    def score(
        self,
        config: Config,
        base: CacheEntry,
        base_ids: Sequence[int],
        context: Sequence[int],
        wanted: Mapping[tuple[int, ...], Sequence[int]],
    ) -> tuple[dict[tuple[int, ...], dict[int, float]], int, int]: ...

    def foreground(self) -> AbstractContextManager[None]: ...


@dataclass(frozen=True)
class Prefill:
    logits: Any
    tokens: int
    seconds: float
    rebuild_s: float


@dataclass(frozen=True)
class PrefetchRecord:
    config: Config
    tokens: int
    seconds: float


class PeftSession(EngineSession):
    """One episode: its active configuration, history and per-configuration prefix caches."""

    def __init__(self, engine: SessionHost, cache_budget_bytes: int) -> None:
        self._engine = engine
        self._library = dict(engine._library)
        self._history: list[int] = []
        self._seen = 0  # history tokens that went through the model under any configuration
        self.rebuilt_tokens = 0  # history tokens re-processed under new weights (generate, score)
        self.caches = PrefixCacheStore(cache_budget_bytes)
        self._locks: dict[Config, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._prefetches: dict[Config, threading.Thread] = {}
        self.prefetched: list[PrefetchRecord] = []
        self._closed = False

    # -- configuration -------------------------------------------------------------------
    @property
    def library(self) -> Mapping[str, str]:
        """capability -> weight key, fixed for the episode."""
        return self._library

    # -- history -------------------------------------------------------------------------
    @property
    def history(self) -> Sequence[int]:
        return tuple(self._history)

    def append(self, token_ids: Sequence[int]) -> None:
        self._check_open()
        ids = list(token_ids)
        bad = [t for t in ids if type(t) is not int or not 0 <= t < self._engine.vocab_size]
        if bad:
            raise InvalidTokensError(
                f"token ids outside the vocabulary [0, {self._engine.vocab_size}): {bad[:5]}"
            )
        self._history.extend(ids)

    # -- forward passes ------------------------------------------------------------------
    def _key(self, config: Config) -> Config:
        return None if config is None else self._library[config]

    def _lock(self, config: Config) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(config, threading.Lock())

    def _feed(
        self, config: Config, entry: CacheEntry, end: int, chunk: int = PREFILL_CHUNK
    ) -> Prefill:
        """Extend `entry` to history[:end]; re-processing seen tokens counts as rebuild."""
        logits, tokens, seconds, rebuild_s = None, 0, 0.0, 0.0
        for lo, hi in _chunks(entry.length, min(self._seen, end), end, chunk):
            ext = self._engine.run(self._key(config), entry, self._history[lo:hi])
            logits, tokens, seconds = ext.logits, tokens + ext.tokens, seconds + ext.seconds
            if hi <= self._seen:
                rebuild_s += ext.seconds
                self.rebuilt_tokens += ext.tokens
        self._seen = max(self._seen, end)
        return Prefill(logits, tokens, seconds, rebuild_s)

    def next_logits(self) -> Any:
        """Logits of the next token under the active configuration (cache kept up to date)."""
        self._check_open()
        config = self._active
        with self._engine.foreground(), self._lock(config):
            entry = self.caches.checkout(config) or new_entry(self._engine.model)
            try:
                return self._prefill(config, entry).logits
            finally:
                self.caches.checkin(config, entry)

    def _prefill(self, config: Config, entry: CacheEntry) -> Prefill:
        end = len(self._history)
        if end == 0:
            raise InvalidTokensError("the history is empty: append a prompt before generating")
        crop(entry, end - 1)  # the last token is re-run when its logits are needed
        return self._feed(config, entry, end)

    def generate(
        self,
        max_new_tokens: int,
        stop_ids: Sequence[int] = (),
        on_token: Callable[[int], None] | None = None,
    ) -> GenerationResult:
        self._check_open()
        if max_new_tokens < 1:
            raise InvalidTokensError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        config = self._active
        with self._engine.foreground(), self._lock(config):
            entry = self.caches.checkout(config) or new_entry(self._engine.model)
            hit = min(entry.length, len(self._history) - 1)
            try:
                pre = self._prefill(config, entry)
                return self._decode(config, entry, pre, hit, max_new_tokens, stop_ids, on_token)
            finally:
                self.caches.checkin(config, entry)

    def score_branches(
        self,
        contexts: Sequence[Sequence[int]],
        wanted: Mapping[tuple[int, ...], Sequence[int]],
    ) -> ScoredBranches:
        """Each context forwarded once from the active configuration's cache of the history
        (as far as it agrees with it; the history's own cache is brought up to date on the
        way), then the prefixes as one batch after it (`kvcache.score_after`).

        A rebuild, as for `generate`: history that other weights ran since this
        configuration's cache of it ends, in the history's own update and in each rotated
        context's forward (the part of that forward's time, by its share of tokens)."""
        self._check_open()
        config = self._active
        start = time.perf_counter()
        logprobs, prefilled, hit, rebuild_s = [], 0, 0, 0.0
        with self._engine.foreground(), self._lock(config):
            entry = self.caches.checkout(config) or new_entry(self._engine.model)
            try:
                end = max(0, len(self._history) - 1)
                crop(entry, end)
                seen, own = self._seen, entry.length
                if end > entry.length:
                    pre = self._feed(config, entry, end)
                    prefilled, rebuild_s = prefilled + pre.tokens, rebuild_s + pre.rebuild_s
                for context in contexts:
                    began = time.perf_counter()
                    scored, run, shared = self._engine.score(
                        self._key(config), entry, self._history, context, wanted
                    )
                    again = min(run, max(0, min(seen, len(context)) - max(shared, own)))
                    self.rebuilt_tokens += again
                    rebuild_s += (time.perf_counter() - began) * again / run if run else 0.0
                    logprobs.append(scored)
                    prefilled, hit = prefilled + run, hit + shared
            finally:
                self.caches.checkin(config, entry)
        seconds = time.perf_counter() - start
        return ScoredBranches(logprobs, prefilled, seconds, hit, rebuild_s)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self._decode_text(list(ids))

    def _decode(
        self,
        config: Config,
        entry: CacheEntry,
        pre: Prefill,
        hit: int,
        max_new_tokens: int,
        stop_ids: Sequence[int],
        on_token: Callable[[int], None] | None,
    ) -> GenerationResult:
        stops, out, finish = set(stop_ids), [], "length"
        logits, decode_s = pre.logits, 0.0
        for i in range(max_new_tokens):
            token = int(logits.argmax())
            self._history.append(token)
            out.append(token)
            if on_token is not None:
                on_token(token)
            if token in stops:
                finish = "stop"
                break
            if i + 1 < max_new_tokens:
                ext = self._engine.run(self._key(config), entry, [token])
                logits, decode_s = ext.logits, decode_s + ext.seconds
        self._seen = max(self._seen, entry.length)
        text = self._decode_text(out)
        return GenerationResult(
            tuple(out), text, finish, pre.tokens, len(out), pre.seconds, decode_s,
            pre.rebuild_s, hit,
        )  # fmt: skip

    def _decode_text(self, ids: list[int]) -> str:
        tok = self._engine.tokenizer
        return tok.decode(ids, skip_special_tokens=False) if tok is not None else ""

    # -- prefetch ------------------------------------------------------------------------
    def prefetch(self, config: Config) -> None:
        self._check_open()
        if config is not None and config not in self.library:
            raise UnknownAdapterError(config, sorted(self.library))
        end, epoch = len(self._history), self._engine.epoch
        thread = threading.Thread(
            target=self._build, args=(config, end, epoch), name=f"prefetch-{config}", daemon=True
        )
        self._prefetches[config] = thread
        thread.start()

    def _build(self, config: Config, end: int, epoch: int) -> None:
        """Background: extend `config`'s cache to history[:end] until foreground work starts.

        A prefetch uses the window in which the engine has nothing latency-critical to do (an
        external tool call in flight). As soon as a generate starts on any session it stops
        after the current chunk and checks the partial cache in: a generate of `config`
        continues from it, and the next `prefetch` call picks up where it ended.
        """
        try:
            with self._lock(config):
                entry = self.caches.checkout(config) or new_entry(self._engine.model)
                try:
                    self._prefetch_chunks(config, entry, end, epoch)
                finally:
                    self.caches.checkin(config, entry)
        except Exception:  # a background thread has nobody to raise to
            logger.exception("prefetch of %s failed", config)

    def _prefetch_chunks(self, config: Config, entry: CacheEntry, end: int, epoch: int) -> None:
        tokens, seconds = 0, 0.0
        while entry.length < end:
            ids = self._history[entry.length : min(end, entry.length + PREFETCH_CHUNK)]
            ext = self._engine.run(self._key(config), entry, ids, background_epoch=epoch)
            if ext is None:
                break
            tokens, seconds = tokens + ext.tokens, seconds + ext.seconds
            self._seen = max(self._seen, entry.length)
        if tokens:
            self.prefetched.append(PrefetchRecord(config, tokens, seconds))

    def wait_prefetch(self, timeout: float | None = None) -> None:
        """Block until every started prefetch has finished (tests, benchmarks)."""
        for thread in list(self._prefetches.values()):
            thread.join(timeout)

    # -- lifecycle -----------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError("session is closed")

    def close(self) -> None:
        self._closed = True
        self.wait_prefetch()
        self.caches.clear()
        self._engine._sessions.discard(self)


def _chunks(start: int, seen: int, end: int, chunk: int) -> list[tuple[int, int]]:
    """[start, end) cut at `seen` (rebuild vs new tokens) and into `chunk`-token pieces."""
    bounds = sorted({start, end, *range(start, end, chunk), max(start, min(seen, end))})
    return [(lo, hi) for lo, hi in zip(bounds, bounds[1:], strict=False) if hi > lo]
