"""Scripted engines for tests: the `Engine` seam without a model, or with scripted replies.

`ScriptedEngine` replays assistant replies from a script instead of decoding, and keeps the
rest of the contract real: one `ScriptedSession` per episode with its own token history, its
own active adapter (zero or one, the typed errors of `runtime.errors`), a per-configuration
prefix cache (so prefilled / cache-hit counts behave like an engine's) and a log of switches
and prefetches for assertions. `CharTokenizer` is a dependency-free tokenizer with the ChatML
special tokens, so the agent loop runs without transformers.

`ForcedEngine` wraps a real engine (PeftEngine) and teacher-forces scripted replies through
real forward passes, for end-to-end tests on a random tiny model.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.chat import IM_END, IM_START
from runtime.engine import (
    AdapterSpec,
    AuditReport,
    Config,
    Engine,
    EngineSession,
    GenerationResult,
    SwitchRecord,
)
from runtime.lora_tools import DEFAULT_DESCRIPTIONS

SPECIALS = ("<|endoftext|>", IM_START, IM_END)
_SPECIAL_RE = re.compile("(" + "|".join(re.escape(s) for s in SPECIALS) + ")")

# A script is a list of replies (each session replays its own copy from the start) or a
# function of the session that returns the next reply (for replies that depend on state).
Script = Sequence[str] | Callable[[EngineSession], str]


class CharTokenizer:
    """One id per character; the ChatML special tokens are single ids (0, 1, 2)."""

    eos_token = IM_END

    def __init__(self) -> None:
        self.eos_token_id = SPECIALS.index(IM_END)

    def __len__(self) -> int:
        return 0x110000 + len(SPECIALS)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids: list[int] = []
        for piece in _SPECIAL_RE.split(text):
            if piece in SPECIALS:
                ids.append(SPECIALS.index(piece))
            else:
                ids.extend(ord(c) + len(SPECIALS) for c in piece)
        return ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        out = []
        for i in ids:
            if i < len(SPECIALS):
                out.append("" if skip_special_tokens else SPECIALS[i])
            else:
                out.append(chr(i - len(SPECIALS)))
        return "".join(out)

    def convert_tokens_to_ids(self, token: str) -> int:
        return SPECIALS.index(token)


@dataclass(frozen=True)
class Prefetch:
    config: Config
    history_len: int


class Replies:
    """The replies of one session: a copy of a list, or a function of the session."""

    def __init__(self, script: Script) -> None:
        self._script = script
        self._queue = None if callable(script) else list(script)

    def next(self, session: EngineSession) -> str:
        if callable(self._script):
            return self._script(session)
        assert self._queue is not None
        if not self._queue:
            raise RuntimeError("the script has no more replies")
        return self._queue.pop(0)


class ScriptedSession(EngineSession):
    """One episode on a `ScriptedEngine`; `generate` replays the script's next reply."""

    def __init__(self, engine: ScriptedEngine, script: Script) -> None:
        self._engine = engine
        self.replies = Replies(script)
        self._active: Config = None
        self._history: list[int] = []
        self._cached: dict[Config, int] = {}  # config -> history tokens already processed
        self.switches: list[SwitchRecord] = []
        self.prefetches: list[Prefetch] = []
        self.generations = 0
        self.closed = False

    @property
    def history(self) -> Sequence[int]:
        return tuple(self._history)

    @property
    def library(self) -> Mapping[str, AdapterSpec]:
        return self._engine.adapters

    def _switched(self, record: SwitchRecord) -> SwitchRecord:
        self.switches.append(record)
        return record

    def append(self, token_ids: Sequence[int]) -> None:
        self._history.extend(token_ids)

    def generate(
        self,
        max_new_tokens: int,
        stop_ids: Sequence[int] = (),
        on_token: Callable[[int], None] | None = None,
    ) -> GenerationResult:
        tokenizer = self._engine.tokenizer
        prefilled = len(self._history) - self._cached.get(self._active, 0)
        hit = self._cached.get(self._active, 0)
        reply = self.replies.next(self) + IM_END
        ids, finish = _take(tokenizer.encode(reply), max_new_tokens, stop_ids)
        for token in ids:
            self._history.append(token)
            if on_token is not None:
                on_token(token)
        self._cached[self._active] = len(self._history)
        self.generations += 1
        return GenerationResult(
            token_ids=tuple(ids),
            text=tokenizer.decode(ids),
            finish_reason=finish,
            prefilled=prefilled,
            decoded=len(ids),
            prefill_s=0.0,
            decode_s=0.0,
            rebuild_s=0.0,
            cache_hit=hit,
        )

    def prefetch(self, config: Config) -> None:
        self.prefetches.append(Prefetch(config, len(self._history)))
        self._cached[config] = len(self._history)

    def close(self) -> None:
        self.closed = True


def _take(ids: list[int], limit: int, stop_ids: Sequence[int]) -> tuple[list[int], str]:
    for n, token in enumerate(ids[:limit]):
        if token in stop_ids:
            return ids[: n + 1], "stop"
    return ids[:limit], "length" if len(ids) > limit or not stop_ids else "stop"


class ScriptedEngine(Engine):
    """A library of named adapters and a script; no weights."""

    def __init__(
        self,
        adapters: Sequence[str] | Mapping[str, AdapterSpec] = ("plan", "search", "write"),
        script: Script = (),
        tokenizer: object | None = None,
    ) -> None:
        if isinstance(adapters, Mapping):
            self._adapters = dict(adapters)
        else:
            self._adapters = {n: spec_for(n) for n in adapters}
        self.tokenizer = tokenizer or CharTokenizer()
        self.script = script
        self.sessions: list[ScriptedSession] = []
        self._lock = threading.Lock()

    @property
    def adapters(self) -> Mapping[str, AdapterSpec]:
        return self._adapters

    def new_session(self) -> ScriptedSession:
        session = ScriptedSession(self, self.script)
        with self._lock:
            self.sessions.append(session)
        return session

    def audit(self) -> AuditReport:
        return AuditReport(
            ok=True, backbone_root="0" * 64, adapters={n: "0" * 64 for n in self._adapters}
        )


class ForcedEngine(Engine):
    """A real engine whose replies follow a script (teacher forcing).

    Every scripted token goes through a real forward pass of the wrapped session under its
    active adapter (`next_logits`, as `PeftSession` offers: one pass for the prompt, one
    batched pass for the forced reply), so caches, rebuilds and switch costs are real; only
    the choice of token is scripted. The logits seen at each reply's
    first token are kept in `ForcedSession.first_logits` for assertions.
    """

    def __init__(self, inner: Engine, script: Script) -> None:
        self.inner = inner
        self.tokenizer = inner.tokenizer
        self.script = script
        self.sessions: list[ForcedSession] = []

    @property
    def adapters(self) -> Mapping[str, AdapterSpec]:
        return self.inner.adapters

    def new_session(self) -> ForcedSession:
        session = ForcedSession(self.inner.new_session(), self.tokenizer, self.script)
        self.sessions.append(session)
        return session

    def audit(self) -> AuditReport:
        return self.inner.audit()


class ForcedSession(EngineSession):
    def __init__(self, inner: Any, tokenizer: Any, script: Script) -> None:
        self.inner = inner
        self.tokenizer = tokenizer
        self.replies = Replies(script)
        self.first_logits: list[tuple[Config, Any]] = []

    @property
    def active(self) -> Config:
        return self.inner.active  # type: ignore[no-any-return]

    @property
    def history(self) -> Sequence[int]:
        return self.inner.history  # type: ignore[no-any-return]

    @property
    def library(self) -> Mapping[str, Any]:
        return self.inner.library  # type: ignore[no-any-return]

    def check_activate(self, name: str) -> None:
        self.inner.check_activate(name)

    def activate(self, name: str) -> SwitchRecord:
        return self.inner.activate(name)  # type: ignore[no-any-return]

    def deactivate(self) -> SwitchRecord:
        return self.inner.deactivate()  # type: ignore[no-any-return]

    def append(self, token_ids: Sequence[int]) -> None:
        self.inner.append(token_ids)

    def generate(
        self,
        max_new_tokens: int,
        stop_ids: Sequence[int] = (),
        on_token: Callable[[int], None] | None = None,
    ) -> GenerationResult:
        reply = self.tokenizer.encode(self.replies.next(self) + IM_END, add_special_tokens=False)
        ids, finish = _take(reply, max_new_tokens, stop_ids)
        start = time.perf_counter()
        self.first_logits.append((self.active, self.inner.next_logits()))
        prefill_s = time.perf_counter() - start
        for token in ids:
            if on_token is not None:
                on_token(token)
        self.inner.append(ids)
        self.inner.next_logits()  # one batched forward pass over the forced reply
        decode_s = time.perf_counter() - start - prefill_s
        text = self.tokenizer.decode(ids)
        return GenerationResult(tuple(ids), text, finish, 0, len(ids), prefill_s, decode_s, 0.0)

    def prefetch(self, config: Config) -> None:
        self.inner.prefetch(config)

    def close(self) -> None:
        self.inner.close()


def spec_for(name: str, path: str = "") -> AdapterSpec:
    return AdapterSpec(name=name, path=path, description=DEFAULT_DESCRIPTIONS.get(name, ""))


def by_adapter(replies: Mapping[Config, Sequence[str]]) -> Callable[[EngineSession], str]:
    """A script whose next reply depends on the active adapter (one queue per config)."""
    queues = {config: list(items) for config, items in replies.items()}

    def next_reply(session: EngineSession) -> str:
        queue = queues.get(session.active)
        if not queue:
            raise RuntimeError(f"the script has no more replies for {session.active!r}")
        return queue.pop(0)

    return next_reply


def call(name: str, **arguments: object) -> str:
    """The text of one tool call as a model writes it (for scripts)."""
    import json

    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"
