"""VllmEngine's library on vLLM's CPU build: version names, hot reload, release, audit.

The shared engine starts with plan@1 and write@1 (tests that change it restore it).
"No request is answered from prefix-cache blocks of other weights" is checked three ways:
a new version's first request over a history that an old version has cached gets no cache
hit at all; its tokens equal those of the same request after vLLM's prefix cache is reset;
and they equal those of a fresh reference engine holding only the new weights.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from vllm_support import QUESTIONS, chat_prompt, divergence

from runtime.engine import AdapterSpec
from runtime.errors import (
    AdapterLoadError,
    InvalidTokensError,
    SessionClosedError,
    UnknownAdapterError,
)

pytestmark = pytest.mark.vllm
NEAR_TIE = 0.02  # as in test_vllm_equivalence


def run(engine: Any, history: list[int], config: str | None, tokens: int = 12) -> Any:
    session = engine.new_session()
    try:
        session.append(history)
        if config is not None:
            session.activate(config)
        return session.generate(tokens)
    finally:
        session.close()


def lora_ids(engine: Any) -> dict[str, int]:
    return {key: r.lora.int_id for key, r in engine.resident.items()}


def test_adapters_are_registered_in_vllm_under_version_names(vllm_engine: Any) -> None:
    ids = lora_ids(vllm_engine)
    assert set(ids) == {"plan@1", "write@1"}
    assert vllm_engine.driver.list_loras() == set(ids.values())
    session = vllm_engine.new_session()
    assert session.library == {"plan": "plan@1", "write": "write@1"}
    assert session.lora_request("write").lora_name == "write@1"
    assert session.lora_request(None) is None
    session.close()


def test_reload_keeps_open_episodes_on_their_version(
    fresh_library: Any, specs: dict[str, AdapterSpec], peft_engine: Any, smollm2: Path
) -> None:
    engine = fresh_library
    prompt = chat_prompt(engine.tokenizer, QUESTIONS[3])
    old = engine.new_session()
    old.append(prompt)
    old.activate("write")
    old.generate(8)
    history = list(old.history)

    engine.swap_adapters([specs["plan@1"], specs["write@2"]])
    assert engine.release_unused() == []  # the open episode still uses write@1
    continued = old.generate(12)  # the open episode keeps write@1
    assert old.library["write"] == "write@1"

    new = engine.new_session()
    assert new.library == {"plan": "plan@1", "write": "write@2"}
    new.append(history)
    new.activate("write")
    fresh = new.generate(12)
    new.close()
    # write@1's blocks for this very history are cached; write@2 must not see them
    assert fresh.cache_hit == 0
    assert fresh.token_ids != continued.token_ids  # the versions' weights differ visibly

    assert engine.driver.reset_prefix_cache()
    assert run(engine, history, "write").token_ids == fresh.token_ids
    # fresh reference engines: write@1 (the shared one) and one holding only write@2
    from runtime.engines.peft import PeftEngine

    reference = PeftEngine(smollm2, [specs["write@2"]])
    for engine_, tokens in ((peft_engine, continued), (reference, fresh)):
        d = divergence(engine_, "write", history, tokens.token_ids)
        assert d is None or d.margin <= NEAR_TIE, d

    old.close()
    assert engine.release_unused() == ["write@1"]
    assert set(lora_ids(engine)) == {"plan@1", "write@2"}
    assert engine.driver.list_loras() == set(lora_ids(engine).values())


def test_a_capability_dropped_from_a_revision_is_removed(
    fresh_library: Any, specs: dict[str, AdapterSpec]
) -> None:
    engine = fresh_library
    open_episode = engine.new_session()
    open_episode.append(chat_prompt(engine.tokenizer, QUESTIONS[0]))
    open_episode.activate("write")
    engine.swap_adapters([specs["plan@1"]])
    assert set(engine.adapters) == {"plan"}
    later = engine.new_session()
    with pytest.raises(UnknownAdapterError):
        later.activate("write")
    later.close()
    assert open_episode.generate(4).decoded == 4  # still served by write@1
    assert engine.release_unused() == []
    open_episode.close()
    assert engine.release_unused() == ["write@1"]
    assert engine.driver.list_loras() == {engine.resident["plan@1"].lora.int_id}


def test_a_version_name_never_names_other_weights(
    fresh_library: Any, specs: dict[str, AdapterSpec]
) -> None:
    engine = fresh_library
    impostor = AdapterSpec("write", specs["write@2"].path, version="write@1")
    before = (dict(engine.adapters), engine.driver.list_loras())
    with pytest.raises(AdapterLoadError, match="already names weights"):
        engine.swap_adapters([specs["plan@1"], impostor])
    assert (dict(engine.adapters), engine.driver.list_loras()) == before
    # still refused after write@1 has left vLLM: a name is never reused
    engine.swap_adapters([specs["plan@1"]])
    assert engine.release_unused() == ["write@1"]
    with pytest.raises(AdapterLoadError, match="already names weights"):
        engine.swap_adapters([specs["plan@1"], impostor])


def test_a_bad_batch_is_refused_whole_with_every_problem(
    fresh_library: Any, specs: dict[str, AdapterSpec], tmp_path: Path
) -> None:
    engine = fresh_library
    misfit = tmp_path / "misfit"
    shutil.copytree(specs["write@2"].path, misfit)
    config = json.loads((misfit / "adapter_config.json").read_text())
    (misfit / "adapter_config.json").write_text(json.dumps({**config, "r": 4}))
    bad = [
        AdapterSpec("write", specs["write@2"].path, version="write@2", manifest_root="0" * 64),
        AdapterSpec("code", str(misfit), version="code@1"),
    ]
    before = (dict(engine.adapters), engine.driver.list_loras())
    with pytest.raises(AdapterLoadError) as err:
        engine.swap_adapters([specs["plan@1"], *bad])
    assert "manifest root" in str(err.value)
    assert "do not fit" in str(err.value)
    assert (dict(engine.adapters), engine.driver.list_loras()) == before


def test_audit_reports_file_roots_and_says_what_it_cannot_see(
    fresh_library: Any, specs: dict[str, AdapterSpec], smollm2: Path, tmp_path: Path
) -> None:
    from storage.manifest import manifest_of_file, manifest_of_path

    engine = fresh_library
    report = engine.audit()
    assert report.ok, report.detail
    assert report.backbone_root == manifest_of_path(smollm2).root
    weights = "adapter_model.safetensors"
    assert report.adapters == {
        name: manifest_of_file(Path(specs[f"{name}@1"].path) / weights).root
        for name in ("plan", "write")
    }
    assert "cannot be read" in report.detail
    copy = tmp_path / "plan-copy"
    shutil.copytree(specs["plan@1"].path, copy)
    engine.swap_adapters([AdapterSpec("plan", str(copy), version="plan@9"), specs["write@1"]])
    data = bytearray((copy / weights).read_bytes())
    data[-1] ^= 1
    (copy / weights).write_bytes(bytes(data))
    tampered = engine.audit()
    assert not tampered.ok
    assert "plan" in tampered.detail


def test_switching_back_reuses_cached_blocks_and_prefetch_warms_them(vllm_engine: Any) -> None:
    tok = vllm_engine.tokenizer
    prompt = chat_prompt(tok, QUESTIONS[6] + " " + " ".join(QUESTIONS))
    tool_turn = tok.encode("<|im_start|>tool\n" + " ".join(QUESTIONS[:8]) + "<|im_end|>\n")
    for prefetch in (False, True):
        session = vllm_engine.new_session()
        session.append(prompt)
        session.activate("plan")
        first = session.generate(4)
        session.deactivate()
        session.generate(4)  # the bare backbone's turn re-processes plan's history once
        session.append(tool_turn)
        if prefetch:
            session.prefetch("plan")
            session.wait_prefetch()
        session.activate("plan")
        back = session.generate(4)
        history = len(session.history) - 4
        block = 32
        if prefetch:  # everything up to the last full block came from the warm cache
            assert back.cache_hit >= history - block, (back, history)
        else:  # plan's own earlier blocks, not the bare backbone's later ones
            assert first.prefilled + first.cache_hit - block <= back.cache_hit < history - block
        assert back.prefilled + back.cache_hit == history
        session.close()


def test_a_rebuild_counts_history_run_under_other_weights_only(vllm_engine: Any) -> None:
    tok = vllm_engine.tokenizer
    session = vllm_engine.new_session()
    session.append(chat_prompt(tok, QUESTIONS[3] + " " + " ".join(QUESTIONS[:5])))
    session.activate("plan")
    session.generate(4)
    tool_turn = tok.encode("<|im_start|>tool\n" + QUESTIONS[7] + "<|im_end|>\n")
    session.append(tool_turn)
    again = session.generate(4)  # same weights: plan's partial last block is re-processed
    assert again.prefilled > len(tool_turn), again
    assert session.rebuilt_tokens == 0
    assert again.rebuild_s == 0.0
    ran = len(session.history) - 1  # the last token generated has not been through a model
    session.deactivate()
    bare = session.generate(4)  # the bare backbone re-processes all that plan ran
    assert session.rebuilt_tokens == ran - bare.cache_hit  # (other tests' system prompt)
    assert bare.rebuild_s > 0.0
    session.close()


def test_a_prefetched_configuration_follows_the_history_until_it_is_used(
    vllm_engine: Any,
) -> None:
    tok = vllm_engine.tokenizer
    block = 32
    session = vllm_engine.new_session()
    session.append(chat_prompt(tok, QUESTIONS[5] + " " + " ".join(QUESTIONS[:6])))
    session.prefetch("plan")  # from now on, every generate is followed under plan
    session.generate(4)
    session.append(tok.encode("<|im_start|>tool\n" + " ".join(QUESTIONS[2:9]) + "<|im_end|>\n"))
    session.generate(4)
    session.wait_prefetch()
    session.activate("plan")
    back = session.generate(4)
    history = len(session.history) - 4
    # plan's blocks reach the backbone's last turn, not only the history at the prefetch
    assert back.cache_hit >= history - block, (back, history)
    session.deactivate()  # plan was used: it is no longer followed
    session.append(tok.encode("<|im_start|>tool\n" + " ".join(QUESTIONS[9:14]) + "<|im_end|>\n"))
    session.generate(4)
    session.wait_prefetch()
    session.activate("plan")
    again = session.generate(4)
    assert again.cache_hit < len(session.history) - 4 - block - 4, again
    session.close()


def test_bad_input_is_a_typed_error(vllm_engine: Any) -> None:
    session = vllm_engine.new_session()
    with pytest.raises(InvalidTokensError):
        session.generate(4)
    with pytest.raises(InvalidTokensError):
        session.append([vllm_engine.vocab_size])
    assert session.history == ()
    session.append([1, 2, 3])
    with pytest.raises(InvalidTokensError):
        session.generate(0)
    session.append([5] * 5000)
    with pytest.raises(InvalidTokensError):  # longer than max_model_len
        session.generate(4)
    session.close()
    with pytest.raises(SessionClosedError):
        session.generate(4)


def test_on_cpu_the_dtype_defaults_to_what_the_cpu_computes_natively(smollm2: Path) -> None:
    """vLLM's CPU default casts to bf16, emulated (65x slower matmuls) without AVX512-BF16."""
    from runtime.engines.vllm.engine import VllmEngine, cpu_dtype

    engine = object.__new__(VllmEngine)  # the arguments only: no vLLM started
    engine.backbone_dir, engine.max_loras, engine.max_lora_rank = smollm2, 4, 8
    assert engine._engine_args({})["dtype"] == cpu_dtype()
    assert engine._engine_args({"dtype": "bfloat16"})["dtype"] == "bfloat16"
