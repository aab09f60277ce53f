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
