"""vLLM engine tests on vLLM's CPU build with SmolLM2-135M (run by `make test-vllm`).

Collected only where vLLM is installed (./.venv-vllm); `make test` deselects them through
the `vllm` marker. Starting vLLM takes about a minute on 2 cores, so one engine serves the
whole test session (`vllm_engine`); tests that change its library restore it. Only one vLLM
engine runs at a time: the resolver tests start a server process of their own only after
`vllm_engine` is shut down (they sort last, see `pytest_collection_modifyitems`).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# The project venv has no vLLM: nothing here to collect. (This directory is not named
# tests/vllm: with tests/ on sys.path it would be importable as a package named `vllm`.)
if importlib.util.find_spec("vllm") is None:
    collect_ignore_glob = ["test_*.py"]

os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

# Small, fixed engine settings for a shared 2-core, 24 GiB machine: fp32 like the
# reference engine, 256 MiB of host RAM for the KV cache, 32-token prefix-cache blocks.
ENGINE_ARGS = {
    "dtype": "float32",
    "max_model_len": 4096,
    "block_size": 32,
    "kv_cache_memory_bytes": 256 * 2**20,
}
LAST = ("test_vllm_resolver", "test_vllm_serve")  # modules that start a vLLM server process
# Warnings raised inside vLLM and the torch it imports (not our code): not errors here.
THIRD_PARTY_WARNINGS = [
    "ignore::DeprecationWarning:torch.*",
    "ignore::FutureWarning:torch.*",
    "ignore::UserWarning:torch.*",
    "ignore::DeprecationWarning:vllm.*",
    "ignore::FutureWarning:vllm.*",
    "ignore::UserWarning:vllm.*",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.timeout(900))  # the first test also starts vLLM
        for spec in THIRD_PARTY_WARNINGS:
            item.add_marker(pytest.mark.filterwarnings(spec))
    items.sort(key=lambda item: item.module.__name__.rsplit(".", 1)[-1] in LAST)


@pytest.fixture(scope="session")
def smollm2() -> Path:
    from runtime.models import smollm2_dir

    return smollm2_dir()


@pytest.fixture(scope="session")
def adapter_dir(smollm2: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """plan@1, write@1, write@2 (other weights) as PEFT directories: random, non-zero."""
    from vllm_support import build_adapters

    root = tmp_path_factory.mktemp("smollm2-adapters")
    return build_adapters(smollm2, root, {"plan@1": 1, "write@1": 2, "write@2": 3})


@pytest.fixture(scope="session")
def specs(adapter_dir: dict[str, Path]) -> dict[str, object]:
    from runtime.engine import AdapterSpec

    return {
        version: AdapterSpec(version.split("@")[0], str(path), version=version)
        for version, path in adapter_dir.items()
    }


_STARTED: list[object] = []  # in-process engines, closed before a server process starts


@pytest.fixture(scope="session")
def vllm_engine(smollm2: Path, specs: dict[str, object]) -> Iterator[object]:
    from runtime.engines.vllm import VllmEngine

    engine = VllmEngine(smollm2, [specs["plan@1"], specs["write@1"]], **ENGINE_ARGS)
    _STARTED.append(engine)
    try:
        yield engine
    finally:
        engine.close()


@pytest.fixture(scope="module")
def no_inprocess_vllm() -> None:
    """Shut the shared engine down (if it ran): modules using this sort last."""
    for engine in _STARTED:
        engine.close()  # type: ignore[attr-defined]


@pytest.fixture
def fresh_library(vllm_engine: object, specs: dict[str, object]) -> Iterator[object]:
    """The shared engine, given back with the original library and nothing else resident."""
    yield vllm_engine
    vllm_engine.swap_adapters([specs["plan@1"], specs["write@1"]])  # type: ignore[attr-defined]
    vllm_engine.release_unused()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def peft_engine(smollm2: Path, specs: dict[str, object]) -> object:
    """The reference engine on the same backbone and library (plan@1, write@1)."""
    from runtime.engines.peft import PeftEngine

    return PeftEngine(smollm2, [specs["plan@1"], specs["write@1"]])
