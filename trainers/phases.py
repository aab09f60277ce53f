"""Phase-wise samples: `p + u_k + c_k + v_k` with the paper's loss mask.

For phase k of a trajectory the sample is every message up to and including the assistant
turn that calls offload_lora (v_k), tokenised with `runtime.chat.encode_turns` — exactly the
tokens the runtime holds in context at that point. The loss mask is 1 on the supervised span
(the generated body, through `<|im_end|>`) of each assistant turn of c_k and of v_k, and 0
everywhere else: the earlier interaction p, the load exchange u_k (the load_lora call and its
result), tool observations, user turns and the turn headers.

v_k is one assistant turn. When it carries content before the offload call, that content is
generated in the same step under adapter k, so the whole body (content + call) is supervised.
A load_lora turn, content included, is generated with no adapter active and is never
supervised. A phase that the trajectory ends before offloading yields a sample without v_k.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from runtime.chat import Tokenizer, Turn, encode_turns
from trainers.trajectory import Phase, Trajectory


@dataclass(frozen=True)
class PhaseSample:
    trajectory: str
    capability: str
    phase: int
    input_ids: tuple[int, ...]
    loss_mask: tuple[int, ...]

    @property
    def n_supervised(self) -> int:
        return sum(self.loss_mask)

    def to_json(self) -> dict[str, object]:
        return {
            "trajectory": self.trajectory,
            "capability": self.capability,
            "input_ids": list(self.input_ids),
            "loss_mask": list(self.loss_mask),
        }


def phase_mask(turns: Sequence[Turn], phase: Phase) -> list[int]:
    """The loss mask over `turns[:phase.end]` for one phase."""
    mask: list[int] = []
    for i, turn in enumerate(turns[: phase.end]):
        bits = [0] * len(turn.ids)
        if turn.role == "assistant" and phase.start <= i < phase.end:
            span = turn.supervised
            bits[span.start : span.stop] = [1] * (span.stop - span.start)
        mask.extend(bits)
    return mask


def samples_of(
    trajectory: Trajectory, tokenizer: Tokenizer, capabilities: Collection[str] | None = None
) -> list[PhaseSample]:
    """One sample per phase (of `capabilities`, or all) that has a supervised token."""
    wanted = [
        (n, p)
        for n, p in enumerate(trajectory.phases)
        if capabilities is None or p.capability in capabilities
    ]
    if not wanted:
        return []
    turns = encode_turns(tokenizer, trajectory.messages, trajectory.tools)
    out = []
    for n, phase in wanted:
        ids = tuple(i for turn in turns[: phase.end] for i in turn.ids)
        mask = tuple(phase_mask(turns, phase))
        if any(mask):
            out.append(PhaseSample(trajectory.id, phase.capability, n, ids, mask))
    return out


def build_samples(
    trajectories: Iterable[Trajectory],
    tokenizer: Tokenizer,
    capabilities: Collection[str] | None = None,
) -> list[PhaseSample]:
    return [s for t in trajectories for s in samples_of(t, tokenizer, capabilities)]


def covered_capabilities(samples: Iterable[PhaseSample]) -> list[str]:
    """The capabilities whose tokens the samples supervise, sorted."""
    return sorted({s.capability for s in samples if s.n_supervised})
