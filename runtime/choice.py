"""Constrained choice: the soft policy's valid moves, scored by the backbone's log-probability.

When the soft policy is `constrained` and no adapter is active (at an episode's start and at
every phase end), the runtime offers only the moves valid now: `load_lora` of one of the
library's capabilities, or the closing reply (answer: the episode ends). Each move is the
exact token sequence the chat format renders for it (`choice_options`).

The engine teacher-forces the options after the context and takes the move of highest
log-probability at the tokens where the options part ways (`decisions`: the first token,
`<tool_call>` against the closing reply's, and the capability's name), averaged over the
cyclic rotations of the order in which load_lora lists the capabilities (`rotations`; the
enum and the description lines together, so each capability is listed once in every
position). A small backbone mostly follows the listing: greedy decoding under a mask took
the first-listed capability in 11 of 12 (question, order) pairs on SmolLM2-135M; averaged
over the rotations the position cancels and what is left is the model's preference. No
router is trained; the model's own probabilities still choose.

Only the tokens where the options part ways, not the whole option: every load is the same
33-token call scaffold around its name, which the bare SmolLM2 writes with about 35 nats of
doubt in all, and the closing reply is 3 tokens; summed over whole options the answer won on
all 5 test questions (-15 against -47 to -55, bench/bench_soft_choice.py) and WeAct-soft would
end every episode at once. The per-token mean turns that around by length alone. The
scaffold says how well the model knows the call syntax, the same for every load, not which
move it prefers; the other tokens of an option follow from its earlier ones (the decode under
a mask never had a choice there).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.chat import IM_END, LOAD_LORA, ToolCall, encode, format_calls
from runtime.errors import InvalidTokensError

ANSWER = "answer"  # the move that ends the episode with the closing reply


@dataclass(frozen=True)
class Option:
    move: str  # a capability to load, or ANSWER
    text: str  # the assistant body the move is, `<|im_end|>` included
    ids: tuple[int, ...]


def choice_options(tokenizer: Any, library: Iterable[str], closing: str) -> list[Option]:
    """Load each capability of `library` (sorted), or close with `closing`: the bodies the
    chat format renders for these assistant turns, as token sequences."""
    moves = [
        (cap, format_calls([ToolCall(LOAD_LORA, {"capability": cap})])) for cap in sorted(library)
    ]
    moves.append((ANSWER, closing))
    return [Option(m, body + IM_END, tuple(encode(tokenizer, body + IM_END))) for m, body in moves]


def rotations(names: Iterable[str]) -> list[list[str]]:
    """The cyclic rotations of `names` sorted: every name in every position once (one empty
    order for no names)."""
    ordered = sorted(names)
    return [ordered[r:] + ordered[:r] for r in range(len(ordered))] or [[]]


def check_options(options: Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
    """The options as tuples; they must be non-empty and prefix-free (none starts another,
    so each ends where another has a token to score: every option is a complete move)."""
    seqs = [tuple(o) for o in options]
    if not seqs or any(not s for s in seqs):
        raise InvalidTokensError("a constrained choice needs non-empty options")
    for i, a in enumerate(seqs):
        for j, b in enumerate(seqs):
            if i != j and b[: len(a)] == a:
                raise InvalidTokensError(f"option {i} is a prefix of option {j}")
    return seqs


def check_contexts(contexts: Sequence[Sequence[int]]) -> list[list[int]]:
    ctxs = [list(c) for c in contexts]
    if not ctxs or any(not c for c in ctxs):
        raise InvalidTokensError("a constrained choice needs non-empty contexts")
    return ctxs


def branches(options: Sequence[tuple[int, ...]]) -> dict[tuple[int, ...], list[int]]:
    """Every distinct prefix of the options -> the tokens that follow it in some option: the
    next-token log-probabilities a context's scoring needs (options that share a prefix share
    its tokens' log-probabilities)."""
    out: dict[tuple[int, ...], list[int]] = {}
    for o in options:
        for i, token in enumerate(o):
            nxt = out.setdefault(o[:i], [])
            if token not in nxt:
                nxt.append(token)
    return out


def decisions(options: Sequence[tuple[int, ...]]) -> dict[tuple[int, ...], list[int]]:
    """Where the options part ways: each prefix followed by more than one token -> those
    tokens. The other tokens of an option follow from its earlier ones."""
    return {p: tokens for p, tokens in branches(options).items() if len(tokens) > 1}


def option_scores(
    options: Sequence[tuple[int, ...]],
    logprobs: Sequence[Mapping[tuple[int, ...], Mapping[int, float]]],
) -> list[float]:
    """`logprobs[context][prefix][token]`: next-token log-probabilities. Each option's
    log-probability at the tokens where the options part ways (`decisions`), averaged over
    the contexts."""
    points = decisions(options)
    return [
        sum(per[o[:i]][o[i]] for per in logprobs for i in range(len(o)) if o[:i] in points)
        / len(logprobs)
        for o in options
    ]


def best(scores: Sequence[float]) -> int:
    """The index of the highest score; ties go to the first (options are sorted)."""
    return max(range(len(scores)), key=lambda i: (scores[i], -i))


def chosen_move(options: Sequence[Option], ids: Sequence[int]) -> Option:
    """The option that `ids` is (raises InvalidTokensError when none)."""
    by_ids: Mapping[tuple[int, ...], Option] = {o.ids: o for o in options}
    option = by_ids.get(tuple(ids))
    if option is None:
        raise InvalidTokensError("the constrained choice picked no valid move")
    return option
