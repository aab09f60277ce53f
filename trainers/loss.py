"""Masked next-token NLL: the loss of training and the metric of evaluation."""

from __future__ import annotations

from typing import Any

from trainers.phases import PhaseSample


def sample_tensors(sample: PhaseSample, device: str = "cpu") -> tuple[Any, Any]:
    import torch

    ids = torch.tensor([sample.input_ids], dtype=torch.long, device=device)
    mask = torch.tensor([sample.loss_mask], dtype=torch.bool, device=device)
    return ids, mask


def masked_nll(model: Any, sample: PhaseSample) -> tuple[Any, int]:
    """(sum of -log p over supervised tokens, their count): token t is predicted at t-1."""
    import torch.nn.functional as F

    device = next(model.parameters()).device
    ids, mask = sample_tensors(sample, str(device))
    logits = model(input_ids=ids).logits[:, :-1]
    target_mask = mask[:, 1:]
    nll = F.cross_entropy(logits[target_mask].float(), ids[:, 1:][target_mask], reduction="sum")
    return nll, int(target_mask.sum())
