"""Constrained choice: the soft policy's valid moves as token sequences, decoded under a mask.

When the soft policy is `constrained` and no adapter is active (at an episode's start and at
every phase end), the runtime offers only the moves valid now: `load_lora` of one of the
library's capabilities, or the closing reply (answer: the episode ends). Each move is the
exact token sequence the chat format renders for it (`choice_options`), and the engine
decodes greedily under `AllowedSequences`, a logits processor in the sense of transformers'
`prefix_allowed_tokens_fn`: at each step only the tokens that continue some option are
allowed, so the backbone's own logits pick among valid tool calls and nothing else can come
out. No router is trained; the model still chooses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.chat import IM_END, ToolCall, encode, format_calls
from runtime.errors import InvalidTokensError
from runtime.lora_tools import LOAD_LORA

ANSWER = "answer"  # the move that ends the episode with the closing reply


@dataclass(frozen=True)
class Option:
    move: str  # a capability to load, or ANSWER
    text: str  # the assistant body the move is, `<|im_end|>` included
    ids: tuple[int, ...]


class AllowedSequences:
    """The tokens that may come next after a prefix, so that the output is one of `options`.

    Options must be non-empty, distinct and prefix-free (none starts another), so decoding
    stops exactly when one is complete.
    """

    def __init__(self, options: Sequence[Sequence[int]]) -> None:
        seqs = [tuple(o) for o in options]
        if not seqs or any(not s for s in seqs):
            raise InvalidTokensError("a constrained choice needs non-empty options")
        for i, a in enumerate(seqs):
            for j, b in enumerate(seqs):
                if i != j and b[: len(a)] == a:
                    raise InvalidTokensError(f"option {i} is a prefix of option {j}")
        self.options = seqs

    def allowed(self, prefix: Sequence[int]) -> list[int]:
        """The next tokens that keep `prefix` on the way to some option (sorted, distinct)."""
        p = tuple(prefix)
        return sorted({s[len(p)] for s in self.options if len(s) > len(p) and s[: len(p)] == p})

    def complete(self, prefix: Sequence[int]) -> int | None:
        """The index of the option `prefix` is, if it is one."""
        p = tuple(prefix)
        return next((i for i, s in enumerate(self.options) if s == p), None)

    def pick(self, prefix: Sequence[int], scores: Any) -> int:
        """The allowed next token with the highest score (`scores[token]`: logits)."""
        allowed = self.allowed(prefix)
        if not allowed:
            raise InvalidTokensError("the prefix is on the way to no option")
        return max(allowed, key=lambda t: (float(scores[t]), -t))


def choice_options(tokenizer: Any, library: Sequence[str], closing: str) -> list[Option]:
    """Load each capability of `library` (sorted), or close with `closing`: the bodies the
    chat format renders for these assistant turns, as token sequences."""
    moves = [(cap, format_calls([ToolCall(LOAD_LORA, {"capability": cap})])) for cap in library]
    moves.append((ANSWER, closing))
    return [Option(m, body + IM_END, tuple(encode(tokenizer, body + IM_END))) for m, body in moves]


def chosen_move(options: Sequence[Option], ids: Sequence[int]) -> Option:
    """The option that `ids` is (raises InvalidTokensError when none)."""
    by_ids: Mapping[tuple[int, ...], Option] = {o.ids: o for o in options}
    option = by_ids.get(tuple(ids))
    if option is None:
        raise InvalidTokensError("the constrained choice decoded no valid move")
    return option
