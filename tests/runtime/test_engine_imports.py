"""`import runtime.engines` stays light; the vLLM engine fails with an install hint."""

from __future__ import annotations

import subprocess
import sys

import pytest

from runtime.engines import engine_class


def test_importing_engines_loads_no_torch_or_vllm() -> None:
    code = (
        "import sys, runtime, runtime.engine, runtime.engines, runtime.kvcache, runtime.audit; "
        "heavy = {'torch', 'vllm', 'transformers', 'peft'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_engine_table() -> None:
    assert engine_class("peft").__name__ == "PeftEngine"
    with pytest.raises(ValueError, match="unknown engine"):
        engine_class("tgi")


def test_vllm_engine_names_adapters_by_version() -> None:
    from runtime.engine import AdapterSpec
    from runtime.engines.vllm import LoraNames
    from runtime.errors import AdapterLoadError

    names = LoraNames()
    first = names.assign(AdapterSpec("write", "/a", version="write@7"), "a" * 64)
    assert (first.name, first.int_id) == ("write@7", 1)
    assert names.assign(AdapterSpec("write", "/a", version="write@7"), "a" * 64) == first
    with pytest.raises(AdapterLoadError, match="new version name"):
        names.assign(AdapterSpec("write", "/b", version="write@7"), "b" * 64)
    local = names.assign(AdapterSpec("write", "/b"), "b" * 64)
    assert (local.name, local.int_id) == ("write@bbbbbbbbbbbb", 2)


def test_vllm_engine_without_vllm_gives_an_install_hint() -> None:
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    with pytest.raises(ImportError, match=r"weact\[vllm\]"):
        engine_class("vllm")("/nonexistent")
