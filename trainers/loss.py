"""Masked next-token NLL: the loss of training and the metric of evaluation."""

from __future__ import annotations

from typing import Any

from trainers.phases import PhaseSample


def masked_nll(model: Any, sample: PhaseSample) -> tuple[Any, int]:
    """(sum of -log p over supervised tokens, their count): token t is predicted at t-1.

    Only the positions that predict a supervised token go through the LM head
    (`logits_to_keep` with indices), which saves most of the vocabulary projection.
    """
    import torch
    import torch.nn.functional as F

    device = next(model.parameters()).device
    ids = torch.tensor([sample.input_ids], dtype=torch.long, device=device)
    mask = torch.tensor(sample.loss_mask[1:], dtype=torch.bool, device=device)
    positions = mask.nonzero().squeeze(1)
    if positions.numel() == 0:
        return torch.zeros((), device=device), 0
    logits = model(input_ids=ids, logits_to_keep=positions).logits[0]
    nll = F.cross_entropy(logits.float(), ids[0, positions + 1], reduction="sum")
    return nll, int(positions.numel())
