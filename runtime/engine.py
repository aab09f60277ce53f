"""The engine seam: what the agent loop needs from a model server.

An `Engine` holds the frozen backbone and every adapter of a library resident. Each episode
gets its own `EngineSession`: its active adapter (zero or one, enforced here and nowhere else),
its token history and its KV caches. The engine applies a session's configuration before each
of that session's forward passes, so two episodes never see each other's adapter state and a
switch is O(1): no weights move.

Implementations: `runtime.engines.peft.PeftEngine` (reference, transformers; CPU and GPU) and
`runtime.engines.vllm.VllmEngine` (GPU serving at scale). Neither is imported here.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime.errors import (
    AdapterAlreadyActiveError,
    ConstrainedChoiceUnsupportedError,
    NoActiveAdapterError,
    UnknownAdapterError,
)

# A weight configuration: an adapter name, or None for the bare backbone.
Config = str | None


@dataclass(frozen=True)
class AdapterSpec:
    """A resident adapter: name shown to the model, version name, weights identity."""

    name: str  # capability, e.g. "write"
    path: str  # local PEFT directory it was loaded from
    version: str | None = None  # "write@7" when it came from the registry
    manifest_root: str | None = None  # expected root; loading refuses a mismatch
    description: str = ""


@dataclass(frozen=True)
class GenerationResult:
    token_ids: tuple[int, ...]
    text: str
    finish_reason: str  # "stop" or "length"
    prefilled: int  # history tokens run through the model before decoding (this call)
    decoded: int
    prefill_s: float
    decode_s: float
    rebuild_s: float  # the share of prefill_s spent re-processing history after a switch
    cache_hit: int = 0  # history tokens served from a cached prefix of this configuration


@dataclass(frozen=True)
class ScoredBranches:
    # per context: prefix -> {next token: log-probability after context + prefix}
    logprobs: list[dict[tuple[int, ...], dict[int, float]]]
    prefilled: int  # context and prefix tokens run through the model
    seconds: float
    cache_hit: int = 0  # context tokens served from a cached prefix
    # the share of `seconds` spent re-processing history that other weights ran since the
    # active configuration last did (the switch's KV rebuild, as `GenerationResult.rebuild_s`)
    rebuild_s: float = 0.0


@dataclass(frozen=True)
class AuditReport:
    ok: bool
    backbone_root: str
    adapters: Mapping[str, str]  # name -> manifest root recomputed from resident memory
    detail: str = ""


@dataclass
class SwitchRecord:
    from_config: Config
    to_config: Config
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)


class EngineSession(ABC):
    """One episode's state on an engine.

    `activate` / `deactivate` are the one place that enforces zero-or-one active adapter;
    engines only say which names a session may load (`library`) and whether it is open.
    """

    _active: Config = None

    @property
    def active(self) -> Config:
        return self._active

    @property
    @abstractmethod
    def library(self) -> Mapping[str, Any]:
        """The names this session may activate (fixed for the episode)."""

    def _check_open(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Raise SessionClosedError on a closed session (engines that can close override)."""

    def check_activate(self, name: str) -> None:
        """Raise what `activate(name)` would raise, without switching."""
        self._check_open()
        if name not in self.library:
            raise UnknownAdapterError(name, sorted(self.library))
        if self._active is not None:
            raise AdapterAlreadyActiveError(self._active, name)

    def activate(self, name: str) -> SwitchRecord:
        """Make `name` active. Raises UnknownAdapterError, AdapterAlreadyActiveError."""
        start = time.perf_counter()
        self.check_activate(name)
        self._active = name
        return self._switched(SwitchRecord(None, name, time.perf_counter() - start))

    def deactivate(self) -> SwitchRecord:
        """Back to the bare backbone. Raises NoActiveAdapterError."""
        start = time.perf_counter()
        self._check_open()
        previous = self._active
        if previous is None:
            raise NoActiveAdapterError()
        self._active = None
        return self._switched(SwitchRecord(previous, None, time.perf_counter() - start))

    def _switched(self, record: SwitchRecord) -> SwitchRecord:
        """Hook after a switch (the scripted test engine records them)."""
        return record

    @property
    @abstractmethod
    def history(self) -> Sequence[int]: ...

    @abstractmethod
    def append(self, token_ids: Sequence[int]) -> None:
        """Extend the token history; the model sees it on the next forward."""

    @abstractmethod
    def generate(
        self,
        max_new_tokens: int,
        stop_ids: Sequence[int] = (),
        on_token: Callable[[int], None] | None = None,
    ) -> GenerationResult:
        """Greedy decode under the active configuration; the new tokens join the history."""

    def choose(
        self,
        options: Sequence[Sequence[int]],
        contexts: Sequence[Sequence[int]] | None = None,
        on_token: Callable[[int], None] | None = None,
    ) -> GenerationResult:
        """Exactly one of `options` (token sequences, prefix-free) under the active
        configuration: the one of highest log-probability at the tokens where the options
        part ways, averaged over `contexts` (default: the history; `runtime.choice`). The
        chosen tokens join the history. Engines that cannot score tokens raise
        ConstrainedChoiceUnsupportedError."""
        from runtime.choice import best, check_contexts, check_options, decisions, option_scores

        self._check_open()
        opts = check_options(options)
        ctxs = check_contexts([self.history] if contexts is None else contexts)
        wanted = decisions(opts)
        scored = self.score_branches(ctxs, wanted) if wanted else ScoredBranches([{}], 0, 0.0)
        out = opts[best(option_scores(opts, scored.logprobs))]
        self.append(out)
        for token in out:
            if on_token is not None:
                on_token(token)
        return GenerationResult(
            out, self.detokenize(out), "stop", scored.prefilled, len(out), scored.seconds,
            0.0, scored.rebuild_s, scored.cache_hit,
        )  # fmt: skip

    def score_branches(
        self,
        contexts: Sequence[Sequence[int]],
        wanted: Mapping[tuple[int, ...], Sequence[int]],
    ) -> ScoredBranches:
        """Teacher forced under the active configuration: after each context and each prefix
        in `wanted`, the log-probabilities of the prefix's wanted next tokens (the history is
        left as it is)."""
        raise ConstrainedChoiceUnsupportedError(type(self).__name__)

    def detokenize(self, ids: Sequence[int]) -> str:
        return ""

    @abstractmethod
    def prefetch(self, config: Config) -> None:
        """Start building `config`'s cache of the history off the critical path."""

    @abstractmethod
    def close(self) -> None: ...


class Engine(ABC):
    tokenizer: Any
    # whether `set_library` can change the library while serving (a node following a channel)
    follows_channels: bool = False

    @property
    @abstractmethod
    def adapters(self) -> Mapping[str, AdapterSpec]:
        """The library new sessions get: capability -> spec."""

    def set_library(self, specs: Iterable[AdapterSpec]) -> None:
        """Make the library exactly `specs` for new sessions, atomically.

        New versions load next to the old ones (validated first: nothing changes on an
        error); a capability not in `specs` is no longer offered to new sessions. Open
        sessions keep the library they started with until they close; `release_unused`
        then frees what nobody uses.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot change its library")

    def release_unused(self) -> list[str]:
        """Free resident adapter versions that neither the library nor an open session uses;
        returns their names."""
        return []

    @abstractmethod
    def new_session(self) -> EngineSession: ...

    @abstractmethod
    def audit(self) -> AuditReport:
        """Recompute manifest roots of the resident backbone and adapters from memory."""
