"""PeftEngine against peft itself on the tiny model: same logits, O(1) switches, typed errors."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest
import torch

from runtime.engine import AdapterSpec
from runtime.engines.peft import PeftEngine
from runtime.errors import (
    AdapterAlreadyActiveError,
    InvalidTokensError,
    NoActiveAdapterError,
    SessionClosedError,
    UnknownAdapterError,
)

PROMPT = "The agent plans the research, searches the knowledge base and writes the report."


@pytest.fixture(scope="module")
def engine(tiny_backbone: Path, tiny_adapters: dict[str, Path]) -> PeftEngine:
    specs = [AdapterSpec(name, str(path)) for name, path in tiny_adapters.items()]
    return PeftEngine(tiny_backbone, specs)


@pytest.fixture(scope="module")
def prompt_ids(engine: PeftEngine) -> list[int]:
    return engine.tokenizer.encode(PROMPT)


@pytest.fixture(scope="module")
def peft_model(tiny_backbone: Path, tiny_adapters: dict[str, Path]):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_backbone).eval()
    names = list(tiny_adapters)
    model = PeftModel.from_pretrained(base, tiny_adapters[names[0]], adapter_name=names[0])
    for name in names[1:]:
        model.load_adapter(tiny_adapters[name], adapter_name=name)
    return model.eval()


def ours(engine: PeftEngine, config: str | None, ids: list[int]) -> torch.Tensor:
    """Full-sequence logits of the engine's model with the holder set to `config`."""
    engine.holder.name = config
    with torch.inference_mode():
        return engine.model(input_ids=torch.tensor([ids])).logits[0]


def test_each_adapter_matches_peft(engine: PeftEngine, peft_model, prompt_ids: list[int]) -> None:
    for name in engine.adapters:
        peft_model.set_adapter(name)
        with torch.inference_mode():
            want = peft_model(input_ids=torch.tensor([prompt_ids])).logits[0]
        torch.testing.assert_close(ours(engine, name, prompt_ids), want, atol=1e-5, rtol=0)


def test_bare_config_is_the_base_model(
    engine: PeftEngine, tiny_backbone: Path, prompt_ids: list[int]
) -> None:
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_backbone).eval()
    with torch.inference_mode():
        want = base(input_ids=torch.tensor([prompt_ids])).logits[0]
    assert torch.equal(ours(engine, None, prompt_ids), want)


def test_adapters_change_outputs_and_differ(engine: PeftEngine, prompt_ids: list[int]) -> None:
    outs = {c: ours(engine, c, prompt_ids) for c in (None, *engine.adapters)}
    configs = list(outs)
    for i, a in enumerate(configs):
        for b in configs[i + 1 :]:
            assert (outs[a] - outs[b]).abs().max() > 1e-2, (a, b)


def test_session_logits_follow_the_active_adapter(engine: PeftEngine, prompt_ids) -> None:
    session = engine.new_session()
    session.append(prompt_ids)
    for config in ("write", None, "plan"):
        if session.active is not None:
            session.deactivate()
        if config is not None:
            session.activate(config)
        want = ours(engine, config, prompt_ids)[-1]
        torch.testing.assert_close(session.next_logits(), want, atol=1e-4, rtol=0)


def test_switch_errors_are_typed(engine: PeftEngine) -> None:
    session = engine.new_session()
    with pytest.raises(NoActiveAdapterError):
        session.deactivate()
    with pytest.raises(UnknownAdapterError, match="available: plan, search, write"):
        session.activate("code")
    record = session.activate("plan")
    assert (record.from_config, record.to_config) == (None, "plan")
    with pytest.raises(AdapterAlreadyActiveError, match="offload_lora"):
        session.activate("write")
    with pytest.raises(AdapterAlreadyActiveError):
        session.activate("plan")
    assert session.active == "plan"
    assert session.deactivate().from_config == "plan"
    assert session.active is None


def test_closed_session_refuses_work(engine: PeftEngine, prompt_ids: list[int]) -> None:
    session = engine.new_session()
    session.close()
    for call in (lambda: session.activate("plan"), lambda: session.append(prompt_ids)):
        with pytest.raises(SessionClosedError):
            call()
    with pytest.raises(SessionClosedError):
        session.generate(1)


def test_bad_tokens_are_refused_and_change_nothing(engine: PeftEngine) -> None:
    session = engine.new_session()
    with pytest.raises(InvalidTokensError, match="empty"):
        session.generate(2)
    session.append([1, 2])
    for bad in ([3, engine.vocab_size], [-1], [1.5]):
        with pytest.raises(InvalidTokensError):
            session.append(bad)
    with pytest.raises(InvalidTokensError):
        session.generate(0)
    assert session.history == (1, 2)


def test_generate_appends_and_stops(engine: PeftEngine, prompt_ids: list[int]) -> None:
    session = engine.new_session()
    session.append(prompt_ids)
    seen: list[int] = []
    first = session.generate(6, on_token=seen.append)
    assert first.finish_reason == "length"
    assert list(first.token_ids) == seen
    assert first.decoded == 6
    assert list(session.history) == prompt_ids + seen
    stop = first.token_ids[0]
    again = engine.new_session()
    again.append(prompt_ids)
    result = again.generate(6, stop_ids=[stop])
    assert result.token_ids == (stop,)
    assert result.finish_reason == "stop"


def test_generation_equals_a_fresh_greedy_decode(engine: PeftEngine, prompt_ids) -> None:
    session = engine.new_session()
    session.append(prompt_ids)
    session.generate(3)  # bare cache, then the switch forces a rebuild under "search"
    session.activate("search")
    got = session.generate(5)
    ids = list(session.history[: -len(got.token_ids)])
    for token in got.token_ids:
        assert int(ours(engine, "search", ids)[-1].argmax()) == token
        ids.append(token)


def test_switches_move_no_weights(engine: PeftEngine, prompt_ids: list[int]) -> None:
    def snapshot() -> dict[str, tuple[int, int]]:
        params = {n: (id(p), p.data_ptr()) for n, p in engine.model.named_parameters()}
        for name, adapter in engine._loaded.items():
            for key, t in adapter.tensors.items():
                params[f"{name}/{key}"] = (id(t), t.data_ptr())
        return params

    before = snapshot()
    session = engine.new_session()
    session.append(prompt_ids)
    names = list(engine.adapters)
    for i in range(100):
        session.activate(names[i % len(names)])
        session.deactivate()
    session.activate("write")
    session.generate(2)
    assert snapshot() == before


def test_memory_after_100_switches_is_flat(engine: PeftEngine) -> None:
    import tracemalloc

    session = engine.new_session()
    names = list(engine.adapters)

    def switch(n: int) -> None:
        for i in range(n):
            session.activate(names[i % len(names)])
            session.deactivate()

    gc.collect()
    tracemalloc.start()
    switch(1)
    after_one = tracemalloc.get_traced_memory()[0]
    switch(100)
    gc.collect()
    after_hundred, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert after_hundred <= after_one * 1.01 + 4096
    assert peak <= after_one * 1.01 + 16384


def test_concurrent_sessions_keep_their_own_adapter(engine: PeftEngine, prompt_ids) -> None:
    expected = {}
    for config in ("plan", "write"):
        s = engine.new_session()
        s.append(prompt_ids)
        s.activate(config)
        expected[config] = s.generate(8).token_ids
    results: dict[str, tuple[int, ...]] = {}

    def run(config: str) -> None:
        s = engine.new_session()
        s.append(prompt_ids)
        s.activate(config)
        results[config] = s.generate(8).token_ids

    threads = [threading.Thread(target=run, args=(c,)) for c in ("plan", "write") * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == expected
    assert expected["plan"] != expected["write"]


def test_engine_from_a_model_object(tiny_backbone: Path, tiny_adapters, prompt_ids) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_backbone)
    engine = PeftEngine(model, [AdapterSpec("plan", str(tiny_adapters["plan"]))])
    assert engine.tokenizer is None
    assert not any(p.requires_grad for p in engine.model.parameters())
    session = engine.new_session()
    session.append(prompt_ids)
    session.activate("plan")
    assert session.generate(2).text == ""
    assert engine.audit().ok
