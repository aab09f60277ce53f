"""LoRA for vLLM's CPU build: the products grouped by slot, the grouping done once a step.

vLLM's CPU punica ops (`vllm.lora.ops.torch_ops`) compute a LoRA product by gathering each
token's weight matrix, `weights[indices]`, and contracting token by token with `einsum`: a
prefill of N tokens materialises N copies of every A and B matrix of every targeted layer
(prefill about 6x slower than with these ops, `bench/bench_vllm_lora.py`).

`register` (a `vllm.general_plugins` entry point, so it runs in each vLLM process) patches:
- `PunicaWrapperCPU.add_lora_linear`, which every LoRA linear layer calls: the step's tokens
  sorted by slot once (`spans_of`, kept until the next `update_metadata`), then per layer one
  gather, one matmul pair per slot and slice, one scatter-add. vLLM's version goes through the
  `bgmv_*` ops slice by slice, each grouping the tokens again: in a decode step some 40 small
  ops per layer and slot (decoding with LoRA ran at a third of the speed without; now half);
- the three `bgmv_*` ops (the logits and embedding paths, and the `sgmv_*` ops, which call
  them) with versions that multiply each slot's tokens by that slot's matrices
  (`lora_products`).
Same semantics, one difference on purpose: a token whose slot is negative (a request without
LoRA) gets no LoRA term, as in vLLM's GPU kernels, where the gather would have read the last
slot. It patches only on a CPU platform and only vLLM versions whose ops have the signatures
below (`tests/engine_vllm` checks them against vLLM's own, loaded from its source).
"""

from __future__ import annotations

import functools
import logging
from typing import Any, NamedTuple

logger = logging.getLogger(__name__)

OPS = ("bgmv_shrink", "bgmv_expand", "bgmv_expand_slice")
SMALL_SPAN = 64  # tokens of one slot up to which add_lora_linear expands in fp32


def lora_products(inputs: Any, weights: Any, indices: Any, dtype: Any) -> Any:
    """`out[t] = inputs[t] @ weights[indices[t]].T` for every token t: one matmul per slot
    that some token uses, over that slot's tokens (a token with a negative slot gets 0).

    `weights` is (slots, out, in) or (slots, 1, out, in). The work is the tokens' own, not
    tokens x slots: vLLM sizes every slot at the largest rank it serves (`max_lora_rank`),
    and multiplying each token by every slot, as this did before, cost a reproduce run's
    prefill a quarter of its speed (8 slots of rank 32, `bench/bench_vllm_lora.py`). When
    every token uses one slot (a decode step of one adapter's requests) it is one matmul.
    """
    stacked = weights.squeeze(1) if weights.dim() == 4 else weights
    tokens = inputs.shape[0]
    index = indices[:tokens]
    present = index.unique().tolist()
    if len(present) == 1 and present[0] >= 0:
        return inputs.to(dtype) @ stacked[present[0]].to(dtype).T
    out = inputs.new_zeros((tokens, stacked.shape[1]), dtype=dtype)
    for slot in present:
        if slot >= 0:
            rows = (index == slot).nonzero().squeeze(1)
            out.index_copy_(0, rows, inputs[rows].to(dtype) @ stacked[slot].to(dtype).T)
    return out


class Spans(NamedTuple):
    """A step's tokens in slot order: `order` (None when that is 0, 1, ... already) and
    `(slot, start, end)` per slot into it; tokens without a LoRA (negative slot) are left out."""

    order: Any
    spans: list[tuple[int, int, int]]


def spans_of(index: Any) -> Spans:
    """Group a step's tokens by slot: one sort and one host sync for the whole step."""
    import torch

    lora = (index >= 0).nonzero().squeeze(1)
    keys, perm = torch.sort(index[lora], stable=True)
    order = lora[perm]
    slots, counts = torch.unique_consecutive(keys, return_counts=True)
    spans, start = [], 0
    for slot, count in zip(slots.tolist(), counts.tolist(), strict=True):
        spans.append((slot, start, start + count))
        start += count
    if torch.equal(order, torch.arange(index.shape[0])):
        order = None
    return Spans(order, spans)


def add_lora_linear(
    self: Any, y: Any, x: Any, lora_a_stacked: tuple[Any, ...], lora_b_stacked: tuple[Any, ...],
    scale: float, output_slices: tuple[int, ...], *, buffer: Any = None, **kwargs: Any,
) -> None:  # fmt: skip
    """`PunicaWrapperCPU.add_lora_linear`: `y[t] += concat_i(x[t] @ A_i[s].T * scale @ B_i[s].T)`
    for each token t of slot s >= 0: one gather, one matmul pair per (slot, slice), one
    scatter-add per layer. Shrink in fp32 (as vLLM's ops), expand in fp32 for a slot's tokens
    up to `SMALL_SPAN` and in `y`'s dtype above (as vLLM's ops). The grouping is the step's
    (`spans_of`, kept until the next `update_metadata`).
    """
    import torch

    x = x.view(-1, x.shape[-1])
    out = y.view(-1, y.shape[-1])
    cache = self.__dict__.setdefault("_weact_spans", {})
    tokens = x.shape[0]
    if tokens not in cache:
        cache[tokens] = spans_of(self.token_lora_indices[:tokens])
    order, spans = cache[tokens]
    if not spans:
        return
    rows = (x if order is None else x.index_select(0, order)).float()
    products = rows.new_empty((rows.shape[0], sum(output_slices)), dtype=out.dtype)
    for slot, start, end in spans:
        part = rows[start:end]
        # bf16 kernels cost ~20 us a call whatever the size; fp32 ones are faster when small
        dtype = torch.float32 if end - start <= SMALL_SPAN else out.dtype
        offset = 0
        for a, b, size in zip(lora_a_stacked, lora_b_stacked, output_slices, strict=True):
            shrunk = (part @ a[slot, 0].float().T) * scale
            products[start:end, offset : offset + size] = (
                shrunk.to(dtype) @ b[slot, 0, :size].to(dtype).T
            )
            offset += size
    target = out[:, : products.shape[1]]
    if order is None:
        target[: products.shape[0]] += products
    else:
        target.index_add_(0, order, products)


def _forgetting_spans(update_metadata: Any) -> Any:
    @functools.wraps(update_metadata)
    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.__dict__.pop("_weact_spans", None)
        return update_metadata(self, *args, **kwargs)

    return wrapped


def bgmv_shrink(
    inputs: Any, lora_b_weights: Any, output_tensor: Any, lora_indices_tensor: Any,
    scaling: float = 1.0,
) -> None:  # fmt: skip
    outputs = lora_products(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    output_tensor[:, : outputs.shape[1]] = scaling * outputs


def bgmv_expand(
    inputs: Any, lora_b_weights: Any, output_tensor: Any, lora_indices_tensor: Any,
    add_inputs: bool = True,
) -> None:  # fmt: skip
    outputs = lora_products(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    limit = output_tensor.shape[0]
    if outputs.shape[0] == 1 and output_tensor.shape[0] != 1:
        limit = 1
    common = min(outputs.shape[1], output_tensor.shape[1])  # LoRA and model may pad differently
    if add_inputs:
        output_tensor[:, :common] += outputs[:limit, :common]
    else:
        output_tensor[:, :common] = outputs[:limit, :common]


def bgmv_expand_slice(
    inputs: Any, lora_b_weights: Any, output_tensor: Any, lora_indices_tensor: Any,
    slice_offset: int, slice_size: int, add_inputs: bool = True,
) -> None:  # fmt: skip
    outputs = lora_products(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    if add_inputs:
        output_tensor[:, slice_offset : slice_offset + slice_size] += outputs
    else:
        output_tensor[:, slice_offset : slice_offset + slice_size] = outputs


def register() -> None:
    """Patch vLLM's CPU LoRA ops (idempotent; does nothing off CPU or on unknown versions)."""
    try:
        from vllm.platforms import current_platform

        if not current_platform.is_cpu():
            return
        import vllm.lora.ops.torch_ops as torch_ops
        import vllm.lora.ops.torch_ops.lora_ops as lora_ops
        import vllm.lora.punica_wrapper.punica_cpu as punica_cpu
    except ImportError:
        return
    wrapper: Any = getattr(punica_cpu, "PunicaWrapperCPU", None)
    methods = ("add_lora_linear", "update_metadata", "token_lora_indices")
    if not all(hasattr(lora_ops, op) for op in OPS) or not all(
        hasattr(wrapper, name) for name in methods
    ):
        logger.warning("vLLM's CPU LoRA ops changed; keeping vLLM's own (slow on prefill)")
        return
    mine = globals()
    for module in (lora_ops, torch_ops, punica_cpu):
        for op in OPS:
            if hasattr(module, op):
                setattr(module, op, mine[op])
    if getattr(wrapper.update_metadata, "__wrapped__", None) is None:
        wrapper.update_metadata = _forgetting_spans(wrapper.update_metadata)
    wrapper.add_lora_linear = add_lora_linear
