"""runtime/engines/vllm/cpu_lora.py against vLLM's own CPU LoRA ops, on random shapes.

The originals are loaded from vLLM's source file into a private module, so the comparison
holds whether or not the plugin has already patched vLLM in this process. Tokens without a
LoRA (negative slot) are compared with what vLLM's GPU kernels do: no LoRA term.
"""

from __future__ import annotations

import importlib.util
from importlib.metadata import entry_points
from types import ModuleType

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.engines.vllm import cpu_lora as vllm_cpu_lora

pytestmark = pytest.mark.vllm


def _originals() -> ModuleType:
    import vllm.lora.ops.torch_ops.lora_ops as patched

    spec = importlib.util.spec_from_file_location("vllm_lora_ops_original", patched.__file__)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ORIGINAL = _originals()


@st.composite
def problems(draw: st.DrawFn) -> tuple[torch.Tensor, ...]:
    seed = draw(st.integers(0, 2**16))
    tokens, slots = draw(st.integers(1, 24)), draw(st.integers(1, 4))
    rank, hidden = draw(st.sampled_from([1, 4, 8])), draw(st.sampled_from([8, 24, 40]))
    g = torch.Generator().manual_seed(seed)
    index = draw(st.lists(st.integers(-1, slots - 1), min_size=tokens, max_size=tokens))
    x = torch.randn(tokens, hidden, generator=g)
    a = torch.randn(slots, 1, rank, hidden, generator=g)  # shrink: (slots, 1, rank, in)
    b = torch.randn(slots, 1, hidden, rank, generator=g)  # expand: (slots, 1, out, rank)
    return x, a, b, torch.tensor(index, dtype=torch.long)


@settings(max_examples=60, deadline=None)
@given(problems(), st.floats(0.25, 4.0))
def test_shrink_matches_vllm_on_lora_tokens_and_is_zero_elsewhere(
    case: tuple[torch.Tensor, ...], scale: float
) -> None:
    x, a, _b, index = case
    ours = torch.full((x.shape[0], a.shape[2]), 7.0)
    theirs = ours.clone()
    vllm_cpu_lora.bgmv_shrink(x, a, ours, index, scale)
    ORIGINAL.bgmv_shrink(x, a, theirs, index, scale)
    lora = index >= 0
    torch.testing.assert_close(ours[lora], theirs[lora], rtol=1e-5, atol=1e-4)
    assert torch.all(ours[~lora] == 0)


@settings(max_examples=60, deadline=None)
@given(problems(), st.booleans())
def test_expand_and_expand_slice_match_vllm(case: tuple[torch.Tensor, ...], add: bool) -> None:
    x, a, b, index = case
    shrunk = x @ a[0, 0].T  # any (tokens, rank) input
    hidden = b.shape[2]
    base = torch.randn(x.shape[0], hidden + 6)
    ours, theirs = base.clone(), base.clone()
    vllm_cpu_lora.bgmv_expand(shrunk, b, ours, index, add)
    ORIGINAL.bgmv_expand(shrunk, b, theirs, index, add)
    lora = index >= 0
    torch.testing.assert_close(ours[lora], theirs[lora], rtol=1e-5, atol=1e-4)
    expected_plain = base[~lora].clone()
    expected_plain[:, :hidden] = expected_plain[:, :hidden] if add else 0
    torch.testing.assert_close(ours[~lora], expected_plain)

    ours, theirs = base.clone(), base.clone()
    vllm_cpu_lora.bgmv_expand_slice(shrunk, b, ours, index, 3, hidden, add)
    ORIGINAL.bgmv_expand_slice(shrunk, b, theirs, index, 3, hidden, add)
    torch.testing.assert_close(ours[lora], theirs[lora], rtol=1e-5, atol=1e-4)


def test_the_plugin_is_registered_and_patches_vllms_cpu_ops() -> None:
    import vllm.lora.ops.torch_ops as torch_ops
    import vllm.lora.punica_wrapper.punica_cpu as punica_cpu

    names = {e.name: e.value for e in entry_points(group="vllm.general_plugins")}
    assert names["weact_cpu_lora"] == "runtime.engines.vllm.cpu_lora:register"
    vllm_cpu_lora.register()
    vllm_cpu_lora.register()  # idempotent
    for op in vllm_cpu_lora.OPS:
        assert getattr(punica_cpu, op) is getattr(vllm_cpu_lora, op)
        assert getattr(torch_ops, op) is getattr(vllm_cpu_lora, op)
