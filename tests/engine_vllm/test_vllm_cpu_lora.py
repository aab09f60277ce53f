"""runtime/engines/vllm/cpu_lora.py against vLLM's own CPU LoRA ops, on random shapes.

The originals are loaded from vLLM's source file into a private module, so the comparison
holds whether or not the plugin has already patched vLLM in this process. Tokens without a
LoRA (negative slot) are compared with what vLLM's GPU kernels do: no LoRA term.
"""

from __future__ import annotations

import importlib.util
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.engines.vllm import cpu_lora as vllm_cpu_lora

pytestmark = pytest.mark.vllm


def _from_source(patched: ModuleType, name: str) -> ModuleType:
    """A fresh copy of `patched`'s module, run from its source file under `name`."""
    spec = importlib.util.spec_from_file_location(name, patched.__file__)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _originals() -> ModuleType:
    import vllm.lora.ops.torch_ops.lora_ops as patched

    return _from_source(patched, "vllm_lora_ops_original")


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
    wrapper = punica_cpu.PunicaWrapperCPU
    assert wrapper.add_lora_linear is vllm_cpu_lora.add_lora_linear
    wrapped = wrapper.update_metadata.__wrapped__  # once, however often register ran
    assert wrapped.__qualname__.endswith("PunicaWrapperBase.update_metadata")


def _original_wrapper_class() -> type:
    """vLLM's `PunicaWrapperCPU` from its source, calling the original ops."""
    import vllm.lora.punica_wrapper.punica_cpu as patched

    module = _from_source(patched, "vllm.lora.punica_wrapper._punica_cpu_original")
    for op in ("bgmv_shrink", "bgmv_expand", "bgmv_expand_slice", "sgmv_shrink", "sgmv_expand",
               "sgmv_expand_slice"):  # fmt: skip
        setattr(module, op, getattr(ORIGINAL, op))
    return module.PunicaWrapperCPU  # type: ignore[no-any-return]


@st.composite
def layers(draw: st.DrawFn) -> tuple[list[int], tuple[torch.Tensor, ...], tuple[int, ...], int]:
    """A linear layer's LoRA problem: each token's LoRA id (0: none), x, and stacked slices."""
    slots = draw(st.integers(1, 4))
    tokens = draw(st.integers(1, 100))  # over SMALL_SPAN tokens of a slot: the other dtype path
    ids = draw(st.lists(st.integers(0, slots), min_size=tokens, max_size=tokens))
    sizes = tuple(draw(st.lists(st.sampled_from([8, 24]), min_size=1, max_size=3)))
    rank, hidden = draw(st.sampled_from([1, 4, 8])), draw(st.sampled_from([8, 40]))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    x = torch.randn(tokens, hidden, generator=g)
    a = tuple(torch.randn(slots, 1, rank, hidden, generator=g) for _ in sizes)
    b = tuple(torch.randn(slots, 1, size, rank, generator=g) for size in sizes)
    return ids, (x, *a, *b), sizes, slots


def _stepped(wrapper: Any, ids: list[int], slots: int) -> Any:
    """`wrapper` after the metadata of a decode step whose token t uses LoRA id `ids[t]`
    (0: none), slot s holding LoRA id s + 1."""
    from vllm.lora.layers.utils import LoRAMapping

    mapping = LoRAMapping(ids, ids, is_prefill=False)
    wrapper.update_metadata(mapping, list(range(1, slots + 1)), slots, 32000)
    return wrapper


@settings(max_examples=60, deadline=None)
@given(layers(), st.floats(0.25, 4.0), layers())
def test_add_lora_linear_matches_vllms_wrapper_step_after_step(
    case: tuple[list[int], tuple[torch.Tensor, ...], tuple[int, ...], int], scale: float,
    other: tuple[list[int], tuple[torch.Tensor, ...], tuple[int, ...], int],
) -> None:  # fmt: skip
    """Ours against vLLM's own `add_lora_linear`, and, after the next step's metadata, the
    next step's tokens (the per-step grouping is not reused across steps)."""
    from vllm.lora.punica_wrapper.punica_cpu import PunicaWrapperCPU

    vllm_cpu_lora.register()
    original = _original_wrapper_class()
    room = {"max_num_batched_tokens": 128, "max_batches": 8, "device": "cpu"}
    mine = PunicaWrapperCPU(**room)
    for ids, (x, *weights), sizes, slots in (case, other):
        a, b = tuple(weights[: len(sizes)]), tuple(weights[len(sizes) :])
        base = torch.randn(x.shape[0], sum(sizes))
        ours, theirs = base.clone(), base.clone()
        vllm_cpu_lora.add_lora_linear(_stepped(mine, ids, slots), ours, x, a, b, scale, sizes)
        _stepped(original(**room), ids, slots).add_lora_linear(theirs, x, a, b, scale, sizes)
        lora = torch.tensor(ids) > 0
        torch.testing.assert_close(ours[lora], theirs[lora], rtol=1e-4, atol=1e-3)
        assert torch.equal(ours[~lora], base[~lora])


def test_spans_group_tokens_by_slot_in_order() -> None:
    spans = vllm_cpu_lora.spans_of(torch.tensor([2, -1, 0, 2, 0]))
    assert spans.order is not None
    assert spans.order.tolist() == [2, 4, 0, 3]
    assert spans.spans == [(0, 0, 2), (2, 2, 4)]
    assert vllm_cpu_lora.spans_of(torch.tensor([1, 1, 3])).order is None
    assert vllm_cpu_lora.spans_of(torch.tensor([-1, -1])).spans == []
