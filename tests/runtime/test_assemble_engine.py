"""`build_engine` hands the node's vLLM settings to the engine it makes: here the KV cache
size of `WEACT_RUNTIME_VLLM_KV_CACHE_MIB` (the engine class is a recorder; no vLLM)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import runtime.engines
from runtime.assemble import build_engine
from runtime.settings import get_settings


class Recorder:
    made: dict[str, Any] = {}

    def __init__(self, backbone: str, specs: list[Any], **options: Any) -> None:
        Recorder.made = options


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(runtime.engines, "engine_class", lambda kind: Recorder)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_the_kv_cache_setting_sizes_the_vllm_engine(
    recorded: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("WEACT_RUNTIME_VLLM_KV_CACHE_MIB", "2048")
    build_engine(str(tmp_path), [], "vllm")
    assert Recorder.made["kv_cache_memory_bytes"] == 2048 * 2**20


def test_unset_the_engine_keeps_its_default(
    recorded: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("WEACT_RUNTIME_VLLM_KV_CACHE_MIB", raising=False)
    build_engine(str(tmp_path), [], "vllm")
    assert "kv_cache_memory_bytes" not in Recorder.made


def test_a_size_below_one_mib_is_refused(
    recorded: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("WEACT_RUNTIME_VLLM_KV_CACHE_MIB", "0")
    with pytest.raises(ValueError, match="vllm_kv_cache_mib"):
        build_engine(str(tmp_path), [], "vllm")
