"""Masked next-token NLL: the loss of training and the metric of evaluation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from trainers.phases import PhaseSample


def masked_nll(
    model: Any, sample: PhaseSample, weights: Sequence[float] | None = None
) -> tuple[Any, int]:
    """(sum of -log p over supervised tokens, their count): token t is predicted at t-1.

    Only the positions that predict a supervised token go through the LM head
    (`logits_to_keep` with indices), which saves most of the vocabulary projection. With
    `weights` (one per token), each token's -log p is multiplied by its weight first.
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
    if weights is None:
        nll = F.cross_entropy(logits.float(), ids[0, positions + 1], reduction="sum")
        return nll, int(positions.numel())
    scale = torch.tensor(weights[1:], dtype=torch.float32, device=device)[positions]
    token_nll = F.cross_entropy(logits.float(), ids[0, positions + 1], reduction="none")
    return (token_nll * scale).sum(), int(positions.numel())


def masked_nll_batch(
    model: Any,
    samples: Sequence[PhaseSample],
    weights: Sequence[Sequence[float]] | None = None,
) -> tuple[Any, list[int]]:
    """(each sample's summed -log p over its supervised tokens, their counts) in one padded
    forward: the samples are right-padded (attention mask 0 on the padding, which no real
    token attends to and no loss position reads), and only the hidden states that predict a
    supervised token go through the LM head. Equal to `masked_nll` per sample up to the
    kernels' rounding. With `weights` (one per token of each sample), each supervised token's
    -log p is multiplied by its weight before the sum."""
    import torch
    import torch.nn.functional as F

    device = next(model.parameters()).device
    width = max(len(s.input_ids) for s in samples)
    ids = torch.zeros((len(samples), width), dtype=torch.long, device=device)
    attention = torch.zeros_like(ids)
    predicts = torch.zeros((len(samples), width), dtype=torch.bool, device=device)
    scale = torch.ones((len(samples), width), dtype=torch.float32, device=device)
    for row, s in enumerate(samples):
        n = len(s.input_ids)
        ids[row, :n] = torch.tensor(s.input_ids, dtype=torch.long)
        attention[row, :n] = 1
        predicts[row, : n - 1] = torch.tensor(s.loss_mask[1:], dtype=torch.bool)
        if weights is not None:
            scale[row, : n - 1] = torch.tensor(weights[row][1:], dtype=torch.float32)
    counts = [int(c) for c in predicts.sum(dim=1).tolist()]
    rows, cols = predicts.nonzero(as_tuple=True)
    if rows.numel() == 0:
        return torch.zeros(len(samples), device=device), counts
    decoder = getattr(model, model.base_model_prefix)
    hidden = decoder(input_ids=ids, attention_mask=attention).last_hidden_state
    logits = model.get_output_embeddings()(hidden[rows, cols])
    token_nll = F.cross_entropy(logits.float(), ids[rows, cols + 1], reduction="none")
    if weights is not None:
        token_nll = token_nll * scale[rows, cols]
    nll = torch.zeros(len(samples), dtype=token_nll.dtype, device=device)
    return nll.index_add(0, rows, token_nll), counts


@dataclass(frozen=True)
class Row:
    """One row of a forward: a sample, or the samples of one trajectory folded into the
    longest (its mask the union of theirs), and each token's loss weight."""

    sample: PhaseSample
    weights: tuple[float, ...]
    samples: int = 1  # folded into it

    @property
    def input_ids(self) -> tuple[int, ...]:
        return self.sample.input_ids


def _weights(sample: PhaseSample) -> list[float]:
    """1/count on the tokens `masked_nll` scores (a first token has nothing to predict it)."""
    count = max(sum(sample.loss_mask[1:]), 1)
    return [m / count if j else 0.0 for j, m in enumerate(sample.loss_mask)]


def rows(batch: Sequence[PhaseSample], pack: bool) -> list[Row]:
    """`batch` as rows whose weighted sums are the samples' per-token-mean losses, in the
    order of their first sample; with `pack`, each sample that is a prefix of the longest of
    its trajectory in `batch` folds into that one's row (any other keeps its own)."""
    if not pack:
        return [Row(s, tuple(_weights(s))) for s in batch]
    longest: dict[str, PhaseSample] = {}
    for s in batch:
        top = longest.get(s.trajectory)
        if top is None or len(s.input_ids) > len(top.input_ids):
            longest[s.trajectory] = s
    folded: dict[str | int, tuple[PhaseSample, list[float], list[int]]] = {}
    count: dict[str | int, int] = {}
    for i, s in enumerate(batch):
        top = longest[s.trajectory]
        prefix = top.input_ids[: len(s.input_ids)] == s.input_ids
        base = top if prefix else s
        n = len(base.input_ids)
        key = s.trajectory if prefix else i
        _, weights, mask = folded.setdefault(key, (base, [0.0] * n, [0] * n))
        count[key] = count.get(key, 0) + 1
        for j, (w, m) in enumerate(zip(_weights(s), s.loss_mask, strict=True)):
            weights[j] += w
            mask[j] |= m
    return [
        Row(replace(b, loss_mask=tuple(m)), tuple(w), count[k]) for k, (b, w, m) in folded.items()
    ]
