"""LoRA matmuls for vLLM's CPU build without copying the weights once per token.

vLLM's CPU punica ops (`vllm.lora.ops.torch_ops`) compute a LoRA product by gathering each
token's weight matrix, `weights[indices]`, and contracting token by token with `einsum`: a
prefill of N tokens materialises N copies of every A and B matrix of every targeted layer.
Measured here (`bench/bench_vllm_lora.py`, SmolLM2-135M, bf16, 16 prompts of 1,000 tokens,
four LoRAs): 161 prefill tok/s with its ops, 939 with these, 1,431 without LoRA; decode
35 vs 75 tok/s.

`register` (a `vllm.general_plugins` entry point, so it runs in each vLLM process) replaces
the three `bgmv_*` ops with versions that multiply each slot's tokens by that slot's matrices
(`lora_products`); the `sgmv_*` ops call them, so prefill and decode both take that path. Same
semantics, one difference on purpose: a token whose slot is negative (a request without
LoRA) gets no LoRA term, as in vLLM's GPU kernels, where the gather would have read the last
slot. It patches only on a CPU platform and only vLLM versions whose ops have the signatures
below (`tests/engine_vllm` checks the ops against the originals).
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

OPS = ("bgmv_shrink", "bgmv_expand", "bgmv_expand_slice")


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
    if not all(hasattr(lora_ops, op) for op in OPS):
        logger.warning("vLLM's CPU LoRA ops changed; keeping vLLM's own (slow on prefill)")
        return
    mine = globals()
    for module in (lora_ops, torch_ops, punica_cpu):
        for op in OPS:
            if hasattr(module, op):
                setattr(module, op, mine[op])
