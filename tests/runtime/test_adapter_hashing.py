"""What the vLLM engine reads of an adapter before vLLM starts, on the tiny model without
vLLM: ranks from the config and safetensors header, the tensors hashed once per adapter.

Hashing is counted where every manifest goes through (`storage.manifest.hash_files`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import storage.manifest
from runtime.engine import AdapterSpec
from runtime.engines.lora_fit import WEIGHTS_FILE, adapter_problems, adapter_rank, backbone_shapes
from runtime.errors import AdapterLoadError
from storage.header import Header
from storage.manifest import manifest_of_file


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The safetensors files whose tensors are hashed from now on, once per hashing."""
    files: list[str] = []
    real = storage.manifest.hash_files

    def counting(shards: Sequence[tuple[int, Header]], **kw: Any) -> list[list[str]]:
        files.extend(header.path for _, header in shards)
        return real(shards, **kw)

    monkeypatch.setattr(storage.manifest, "hash_files", counting)
    return files


@pytest.fixture(scope="module")
def rank_16(tiny_backbone: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from runtime.tiny import build_tiny_adapter

    return build_tiny_adapter(tiny_backbone, tmp_path_factory.mktemp("r16") / "a", 7, rank=16)


def test_the_rank_comes_from_config_and_header_alone(
    tiny_adapters: dict[str, Path], rank_16: Path, hashed: list[str], tmp_path: Path
) -> None:
    assert [adapter_rank(p) for p in tiny_adapters.values()] == [4, 4, 4]
    assert adapter_rank(rank_16) == 16
    assert adapter_rank(tmp_path) == 0  # nothing there
    assert hashed == []


def test_the_fit_check_hashes_once_and_gives_the_root(
    tiny_backbone: Path, rank_16: Path, hashed: list[str]
) -> None:
    shapes = backbone_shapes(tiny_backbone)
    problems, root = adapter_problems(rank_16, shapes, max_rank=8)
    assert hashed == [str(rank_16 / WEIGHTS_FILE)]
    assert root == manifest_of_file(rank_16 / WEIGHTS_FILE).root
    assert len(problems) == 1  # one line for the adapter, however many modules are over
    assert "rank 16 exceeds the engine's max_lora_rank 8 in" in problems[0]
    assert adapter_problems(rank_16, shapes, max_rank=16)[0] == []


class Started(Exception):
    """Raised where vLLM would start: everything before it ran for real."""


@pytest.fixture
def until_vllm_starts(monkeypatch: pytest.MonkeyPatch) -> Any:
    """`VllmEngine` that stops with `Started(max_lora_rank)` where vLLM would start."""
    from runtime.engines.vllm import engine as vllm

    def start(engine: Any, _extra: Any) -> None:
        raise Started(engine.max_lora_rank)

    monkeypatch.setattr(vllm, "import_vllm", lambda: None)
    monkeypatch.setattr(vllm.VllmEngine, "_engine_args", start)
    return vllm.VllmEngine


def test_the_vllm_engine_hashes_each_adapter_once_before_it_starts(
    tiny_backbone: Path,
    tiny_adapters: dict[str, Path],
    rank_16: Path,
    hashed: list[str],
    until_vllm_starts: Any,
) -> None:
    library = {**tiny_adapters, "wide": rank_16}
    specs = [AdapterSpec(name, str(path)) for name, path in library.items()]
    with pytest.raises(Started) as started:
        until_vllm_starts(tiny_backbone, specs)
    assert started.value.args == (16,)  # the smallest vLLM rank that fits the library
    assert sorted(hashed) == sorted(str(p / WEIGHTS_FILE) for p in library.values())


def test_the_vllm_engine_refuses_a_rank_over_its_slots_before_it_starts(
    tiny_backbone: Path, rank_16: Path, hashed: list[str], until_vllm_starts: Any
) -> None:
    with pytest.raises(AdapterLoadError, match="rank 16 exceeds the engine's max_lora_rank 8"):
        until_vllm_starts(tiny_backbone, [AdapterSpec("wide", str(rank_16))], max_lora_rank=8)
    assert hashed == [str(rank_16 / WEIGHTS_FILE)]
