"""KV caches of one episode's history, one per weight configuration.

After a switch the retained history must be re-encoded under the new weights: the keys and
values of every layer depend on the adapter that produced them (the paper rebuilds the whole
cache). The history only ever grows, so a cache built under configuration `c` over the first
`n` tokens stays valid for `c` forever. `PrefixCacheStore` keeps one such prefix per
configuration (each adapter and the bare backbone), bounded by a byte budget with LRU
eviction, so returning to an adapter prefills only the tokens added since it was last active.

An entry is checked out while a forward pass extends it and checked back in afterwards, so
eviction never touches a cache that is being written.
"""

from __future__ import annotations

import functools
import inspect
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.engine import Config

DEFAULT_BUDGET_BYTES = 512 * 2**20


@dataclass
class CacheEntry:
    """A DynamicCache holding the keys/values of the first `length` history tokens."""

    cache: Any  # transformers.DynamicCache
    length: int = 0

    @property
    def nbytes(self) -> int:
        return cache_nbytes(self.cache)


def cache_nbytes(cache: Any) -> int:
    total = 0
    for layer in getattr(cache, "layers", ()):
        for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if t is not None:
                total += t.numel() * t.element_size()
    return total


def new_entry(model: Any) -> CacheEntry:
    from transformers import DynamicCache

    return CacheEntry(DynamicCache(config=model.config), 0)


def crop(entry: CacheEntry, length: int) -> None:
    """Drop cached tokens beyond `length` (used to re-run the last token for its logits)."""
    if length < entry.length:
        entry.cache.crop(length - entry.length)
        entry.length = length


@dataclass(frozen=True)
class Extension:
    logits: Any  # torch.Tensor [vocab] of the last fed token, or None when nothing was fed
    tokens: int
    seconds: float


@functools.cache
def cache_keyword(model_class: Any) -> str:
    """The forward argument that takes the KV cache: `cache` in recent transformers 5.x,
    `past_key_values` in older ones (5.19, which vLLM's CPU build pins). The wrong one is
    silently swallowed by `**kwargs`, and every step then runs without its history."""
    params = inspect.signature(model_class.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def extend(model: Any, entry: CacheEntry, token_ids: Sequence[int]) -> Extension:
    """Feed `token_ids` after the entry's prefix; return the last position's logits.

    The caller has already selected the weight configuration the entry belongs to.
    """
    import torch

    if not token_ids:
        return Extension(None, 0, 0.0)
    start = time.perf_counter()
    ids = torch.tensor([list(token_ids)], dtype=torch.long, device=model.device)
    kwargs = {cache_keyword(model.__class__): entry.cache}
    with torch.inference_mode():
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1, **kwargs)
    entry.length += len(token_ids)
    return Extension(out.logits[0, -1], len(token_ids), time.perf_counter() - start)


def score_after(
    model: Any,
    base: CacheEntry,
    base_ids: Sequence[int],
    context: Sequence[int],
    wanted: Mapping[tuple[int, ...], Sequence[int]],
) -> tuple[dict[tuple[int, ...], dict[int, float]], int, int]:
    """Teacher forced after `context`: for each prefix in `wanted`, the log-probabilities of
    its tokens right after context + prefix. The context's keys and values come from `base`
    (a cache of `base_ids`) as far as the two agree, the rest is one forward on a copy, then
    the prefixes go through as one batch over that copy. Returns the log-probabilities, the
    tokens run and the tokens served from `base`; `base` itself is left as it is.
    """
    import copy

    import torch

    head = list(context[:-1])
    shared = 0
    for a, b in zip(base_ids[: base.length], head, strict=False):
        if a != b:
            break
        shared += 1
    if shared:
        entry = CacheEntry(copy.deepcopy(base.cache), base.length)
        crop(entry, shared)
    else:
        entry = new_entry(model)
    extend(model, entry, head[shared:])
    # each row: the context's last token, then the prefix (right padded: a causal model's
    # real positions never see the padding after them)
    prefixes = list(wanted)
    rows = [[context[-1], *p] for p in prefixes]
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows], device=model.device)
    if entry.length:
        entry.cache.batch_repeat_interleave(len(rows))
    kwargs = {cache_keyword(model.__class__): entry.cache}
    with torch.inference_mode():
        logits = model(input_ids=ids, use_cache=True, **kwargs).logits
        last = logits[torch.arange(len(rows)), torch.tensor([len(p) for p in prefixes])]
        lp = last.float().log_softmax(-1)
    scored = {p: {t: float(lp[i, t]) for t in wanted[p]} for i, p in enumerate(prefixes)}
    return scored, len(head) - shared + sum(len(r) for r in rows), shared


class PrefixCacheStore:
    """Per-configuration prefix caches of one history, LRU-bounded by `budget_bytes`."""

    def __init__(self, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> None:
        if budget_bytes < 0:
            raise ValueError(f"cache budget must be >= 0 bytes, got {budget_bytes}")
        self.budget_bytes = budget_bytes
        self._entries: OrderedDict[Config, CacheEntry] = OrderedDict()
        self._lock = threading.Lock()
        self.evictions = 0

    def checkout(self, config: Config) -> CacheEntry | None:
        """Take `config`'s entry out of the store (None when absent or evicted)."""
        with self._lock:
            return self._entries.pop(config, None)

    def checkin(self, config: Config, entry: CacheEntry) -> None:
        """Store `entry` as the most recent one and evict older ones over the budget."""
        with self._lock:
            self._entries[config] = entry
            self._entries.move_to_end(config)
            total = sum(e.nbytes for e in self._entries.values())
            for old in list(self._entries):
                if total <= self.budget_bytes or old == config:
                    break
                total -= self._entries.pop(old).nbytes
                self.evictions += 1

    def lengths(self) -> dict[Config, int]:
        with self._lock:
            return {c: e.length for c, e in self._entries.items()}

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(e.nbytes for e in self._entries.values())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
