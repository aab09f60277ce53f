"""KV caches: a rebuild equals a fresh forward; per-configuration prefixes; prefetch."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from runtime.engine import AdapterSpec
from runtime.engines.peft import PeftEngine
from runtime.errors import UnknownAdapterError
from runtime.kvcache import CacheEntry, PrefixCacheStore, new_entry

TOOL_TEXT = '<tool_response>\n{"ok": true, "active": "search"}\n</tool_response>'


@pytest.fixture(scope="module")
def engine(tiny_backbone: Path, tiny_adapters: dict[str, Path]) -> PeftEngine:
    specs = [AdapterSpec(name, str(path)) for name, path in tiny_adapters.items()]
    return PeftEngine(tiny_backbone, specs)


def fresh_logits(engine: PeftEngine, config: str | None, ids) -> torch.Tensor:
    engine.holder.name = config
    with torch.inference_mode():
        return engine.model(input_ids=torch.tensor([list(ids)])).logits[0, -1]


def started(engine: PeftEngine, text: str = "Step 1: find sources. Step 2: read them."):
    session = engine.new_session()
    session.append(engine.tokenizer.encode(text))
    return session


def test_rebuild_after_a_switch_equals_a_fresh_forward(engine: PeftEngine) -> None:
    session = started(engine)
    session.activate("plan")
    session.generate(4)
    stale = session.caches.checkout("plan")
    session.caches.checkin("plan", stale)
    session.deactivate()
    session.activate("write")
    rebuilt = session.next_logits()
    want = fresh_logits(engine, "write", session.history)
    torch.testing.assert_close(rebuilt, want, atol=1e-4, rtol=0)
    # Reusing plan's cache under write's weights is wrong: the rebuild is necessary.
    entry = session.caches.checkout("plan")
    assert entry is not None
    reused = engine.run("write", entry, session.history[entry.length :]).logits
    assert (reused - want).abs().max() > 1e-2


def test_returning_to_an_adapter_prefills_only_new_tokens(engine: PeftEngine) -> None:
    session = started(engine)
    n0 = len(session.history)
    bare = session.generate(3)
    assert (bare.prefilled, bare.cache_hit, bare.rebuild_s) == (n0, 0, 0.0)
    bare_len = len(session.history) - 1  # the last generated token is not fed yet
    session.activate("plan")
    plan = session.generate(3)
    assert (plan.prefilled, plan.cache_hit) == (len(session.history) - 3, 0)
    assert plan.rebuild_s > 0
    assert session.rebuilt_tokens == bare_len  # what bare had processed, re-run under plan
    session.append(engine.tokenizer.encode(TOOL_TEXT))
    session.deactivate()
    end = len(session.history)
    back = session.generate(2)
    assert back.cache_hit == bare_len
    assert back.prefilled == end - bare_len
    again = session.generate(2)  # same configuration: only the last generated token
    assert (again.prefilled, again.cache_hit) == (1, len(session.history) - 3)
    torch.testing.assert_close(
        session.next_logits(), fresh_logits(engine, None, session.history), atol=1e-4, rtol=0
    )


def test_a_small_budget_evicts_old_configurations(engine: PeftEngine) -> None:
    session = started(engine)
    session.caches.budget_bytes = 1  # keeps only the configuration in use
    session.generate(2)
    session.activate("plan")
    session.generate(2)
    assert set(session.caches.lengths()) == {"plan"}
    session.deactivate()
    back = session.generate(1)
    assert back.cache_hit == 0
    assert back.prefilled == len(session.history) - 1
    assert session.caches.evictions == 2


def test_prefetch_warms_the_next_configuration(engine: PeftEngine) -> None:
    session = started(engine)
    session.activate("search")
    session.generate(4)
    session.prefetch("write")  # while the tool call is in flight
    session.wait_prefetch()
    covered = len(session.history)
    assert session.prefetched[-1].config == "write"
    assert session.prefetched[-1].tokens == covered
    result_ids = engine.tokenizer.encode(TOOL_TEXT)
    session.append(result_ids)
    session.deactivate()
    session.activate("write")
    result = session.generate(3)
    assert (result.prefilled, result.cache_hit) == (len(result_ids), covered)
    assert result.rebuild_s == 0.0
    ids = list(session.history[:-3])
    for token in result.token_ids:
        assert int(fresh_logits(engine, "write", ids).argmax()) == token
        ids.append(token)


def test_prefetch_of_an_unknown_adapter_is_refused(engine: PeftEngine) -> None:
    session = started(engine)
    with pytest.raises(UnknownAdapterError):
        session.prefetch("code")
    session.prefetch(None)
    session.close()
    assert session.caches.nbytes == 0


def test_store_keeps_recent_entries_within_budget(engine: PeftEngine) -> None:
    def entry(tokens: int) -> CacheEntry:
        e = new_entry(engine.model)
        engine.run(None, e, list(range(1, tokens + 1)))
        return e

    one = entry(4).nbytes
    store = PrefixCacheStore(budget_bytes=2 * one)
    for config in ("a", "b", "c"):
        store.checkin(config, entry(4))
    assert list(store.lengths()) == ["b", "c"]
    assert store.checkout("b") is not None
    assert store.checkout("b") is None
    store.checkin("big", entry(12))  # over budget alone: kept, every other entry evicted
    assert list(store.lengths()) == ["big"]
    with pytest.raises(ValueError, match="budget"):
        PrefixCacheStore(-1)


@pytest.mark.parametrize("config", ["write", "plan"])
def test_generate_during_a_prefetch_neither_waits_for_it_nor_breaks_it(
    engine: PeftEngine, config: str
) -> None:
    session = started(engine, TOOL_TEXT * 12)  # a few hundred tokens: several chunks
    session.activate("plan")
    session.prefetch("write")
    result = session.generate(3)  # plan, or write itself, while write is being prefetched
    if config == "write":
        session.deactivate()
        session.activate("write")
        result = session.generate(3)
    session.wait_prefetch(timeout=30)
    assert not any(t.is_alive() for t in session._prefetches.values())
    ids = list(session.history[: -len(result.token_ids)])
    for token in result.token_ids:
        assert int(fresh_logits(engine, session.active, ids).argmax()) == token
        ids.append(token)
    torch.testing.assert_close(
        session.next_logits(), fresh_logits(engine, config, session.history), atol=1e-4, rtol=0
    )
