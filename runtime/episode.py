"""Episodes: one isolated conversation with its own engine session.

An `Episode` owns an `EngineSession` (active adapter, token history, KV caches), its policy,
its messages, per-step records and an event log that the HTTP API streams. Nothing is shared
between episodes but the engine's resident weights. `EpisodeManager` creates, finds, binds
(to legacy MCP sessions), opens behind secret handles (stateless MCP clients, see
`runtime.handles`) and closes them, evicting the oldest idle episode when full. An episode
is pinned to the library it started with; when a `LibrarySource` (a channel follower) is
given, the episode also records that library's revision. An episode belongs to the
credentials that started it (`owner`, as `runtime.handles.owner_of` names them): `get` and
`list` given an owner show only that owner's episodes (the node's HTTP API passes the
caller's, or none for an admin).
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from runtime.engine import Config, Engine, EngineSession, SwitchRecord
from runtime.errors import (
    EpisodeNotFoundError,
    TooManyEpisodesError,
    UnknownHandleError,
    UnrunnableEpisodeError,
)
from runtime.handles import DEFAULT_IDLE_S, HandleTable
from runtime.lora_tools import AdapterControl
from runtime.policy import HardPolicy, Policy

SwitchHook = Callable[[SwitchRecord], None]


class LibrarySource(Protocol):
    """Where the engine's library comes from (a channel follower)."""

    def pinned(self) -> AbstractContextManager[int | None]:
        """Hold the library steady (no swap) for the block; yields the revision it serves."""

    def health(self) -> dict[str, Any]:
        """What the node's /healthz says about its library (`stale`, `audit_ok`, ...)."""

    def release(self) -> list[str]:
        """Episodes closed: free adapter versions that no open episode uses any more."""


@dataclass(frozen=True)
class StepRecord:
    """One generation step and the tool calls it made."""

    step: int
    active: Config
    prefilled: int
    decoded: int
    cache_hit: int
    prefill_s: float
    decode_s: float
    rebuild_s: float
    switch_s: float  # adapter control spent on this step's load/offload calls
    tool_calls: tuple[str, ...] = ()
    finish_reason: str = "stop"
    forced: bool = False  # the runtime, not the model, switched (hard policy)


class EventLog:
    """Append-only, thread-safe list of events; readers wait for new ones."""

    def __init__(self) -> None:
        self._events: list[dict[str, Any]] = []
        self._closed = False
        self._cond = threading.Condition()

    def emit(self, kind: str, **data: Any) -> None:
        with self._cond:
            self._events.append({"seq": len(self._events), "type": kind, **data})
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def wait(self, after: int, timeout: float) -> tuple[list[dict[str, Any]], bool]:
        """Events with seq >= after (blocking up to timeout for one), and whether closed."""
        with self._cond:
            self._cond.wait_for(lambda: len(self._events) > after or self._closed, timeout)
            return list(self._events[after:]), self._closed

    def __iter__(self) -> Iterator[dict[str, Any]]:
        with self._cond:
            return iter(list(self._events))


@dataclass
class Episode:
    id: str
    policy: Policy
    control: AdapterControl
    task: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    events: EventLog = field(default_factory=EventLog)
    status: str = "idle"  # idle | running | done | failed | cancelled
    answer: str | None = None
    finish_reason: str | None = None
    error: str | None = None
    elapsed_s: float = 0.0
    created_at: float = field(default_factory=time.time)
    revision: int | None = None  # the channel revision of the library it is pinned to
    owner: str = ""  # who started it: `runtime.handles.owner_of` its bearer credentials
    cancel_reason: str | None = None  # set by whoever cancels its run, read by the agent

    @property
    def session(self) -> EngineSession:
        return self.control.session

    @property
    def decoded(self) -> int:
        """Tokens the model has generated in this episode."""
        return sum(s.decoded for s in self.steps)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "task": self.task,
            "policy": self.policy.to_json(),
            "revision": self.revision,
            "library": sorted(self.control.session.library),
            "status": self.status,
            "active": self.control.session.active,
            "loaded": list(self.control.loaded),
            "answer": self.answer,
            "finish_reason": self.finish_reason,
            "error": self.error,
            "elapsed_s": self.elapsed_s,
            "messages": self.messages,
            "steps": [asdict(s) for s in self.steps],
            "switches": [_switch_json(s) for s in self.control.switches],
            "totals": totals(self),
        }


def _switch_json(record: SwitchRecord) -> dict[str, Any]:
    return {"from": record.from_config, "to": record.to_config, "seconds": record.seconds}


def totals(episode: Episode) -> dict[str, float]:
    """Where an episode's time went: adapter control, cache rebuild, and their shares."""
    switch_s = sum(s.seconds for s in episode.control.switches)
    rebuild_s = sum(s.rebuild_s for s in episode.steps)
    elapsed = episode.elapsed_s
    return {
        "switch_s": switch_s,
        "rebuild_s": rebuild_s,
        "prefilled": float(sum(s.prefilled for s in episode.steps)),
        "decoded": float(episode.decoded),
        "switch_share": switch_s / elapsed if elapsed > 0 else 0.0,
        "rebuild_share": rebuild_s / elapsed if elapsed > 0 else 0.0,
    }


class EpisodeManager:
    """The episodes of one engine: created, bound to legacy MCP sessions, opened by handle."""

    def __init__(
        self,
        engine: Engine,
        *,
        policy: Policy | None = None,
        max_episodes: int = 64,
        on_switch: SwitchHook | None = None,
        source: LibrarySource | None = None,
        handle_idle_s: float = DEFAULT_IDLE_S,
    ) -> None:
        self.engine = engine
        self.policy = policy or HardPolicy()
        self.max_episodes = max_episodes
        self.on_switch = on_switch
        self.source = source
        self.handles = HandleTable(handle_idle_s)
        # after episodes close: frees the weights no open episode uses (the source's release)
        self.on_close: Callable[[], object] | None = source.release if source else None
        self._episodes: OrderedDict[str, Episode] = OrderedDict()
        self._bindings: dict[str, str] = {}
        self._lock = threading.Lock()

    def create(
        self, *, policy: Policy | None = None, task: str | None = None, owner: str = ""
    ) -> Episode:
        """A new episode; `owner` names the credentials that may see it (`owner_of`).
        `UnrunnableEpisodeError` when its hard order names a capability its library lacks."""
        with self._lock:
            return self._create(policy or self.policy, task, owner, runnable=True)

    def _create(
        self, policy: Policy, task: str | None, owner: str, runnable: bool = False
    ) -> Episode:
        self._make_room()
        with self.source.pinned() if self.source else nullcontext(None) as revision:
            session = self.engine.new_session()
            specs = self.engine.adapters
        library = {name: specs[name] for name in session.library if name in specs}
        if runnable and isinstance(policy, HardPolicy):
            missing = [c for c in policy.order if c not in library]
            if missing:
                session.close()
                raise UnrunnableEpisodeError(policy.order, missing, revision)
        control = AdapterControl(session, policy, library, on_switch=self.on_switch)
        episode = Episode(
            uuid.uuid4().hex, policy, control, task=task, revision=revision, owner=owner
        )
        self._episodes[episode.id] = episode
        return episode

    def get(self, episode_id: str, *, owner: str | None = None) -> Episode:
        """The episode `episode_id`; with `owner`, only if those credentials started it (an
        episode of other credentials is as unknown as one that never was)."""
        with self._lock:
            episode = self._episodes.get(episode_id)
        if episode is None or not _visible(episode, owner):
            raise EpisodeNotFoundError(episode_id)
        return episode

    def bind(self, key: str, *, owner: str = "") -> Episode:
        """The episode bound to an MCP session (or a client-chosen name); created on first use."""
        with self._lock:
            episode_id = self._bindings.get(key)
            if episode_id is not None and episode_id in self._episodes:
                self._episodes.move_to_end(episode_id)
                return self._episodes[episode_id]
            episode = self._create(self.policy, None, owner)
            self._bindings[key] = episode.id
            return episode

    # -- handles (stateless MCP) ---------------------------------------------------------
    def open(self, *, owner: str) -> tuple[Episode, str]:
        """A new episode and the secret handle that reaches it with `owner`'s credentials."""
        self.expire_idle()
        episode = self.create(owner=owner)
        return episode, self.handles.mint(episode.id, owner=owner)

    def by_handle(self, handle: str, *, owner: str) -> Episode:
        """The episode of `handle`; raises a HandleError (unknown, expired, other owner)."""
        self.expire_idle()
        episode_id = self.handles.resolve(handle, owner=owner)
        try:
            return self.get(episode_id)
        except EpisodeNotFoundError:  # evicted meanwhile: the handle is as good as expired
            self.handles.forget_episode(episode_id)
            raise UnknownHandleError() from None

    def close_handle(self, handle: str, *, owner: str) -> Episode:
        """Close the episode of `handle`; the handle is spent."""
        episode = self.by_handle(handle, owner=owner)
        self.handles.revoke(handle, owner=owner)
        self.close(episode.id)
        return episode

    def expire_idle(self) -> list[str]:
        """Close the episodes whose handles went idle; returns their ids."""
        expired = self.handles.expire()
        for episode_id in expired:
            with contextlib.suppress(EpisodeNotFoundError):
                self.close(episode_id)
        return expired

    # -- listing and closing -------------------------------------------------------------
    def list(self, *, owner: str | None = None) -> list[Episode]:
        """Every episode (with `owner`, every one those credentials started), oldest first."""
        with self._lock:
            return [e for e in self._episodes.values() if _visible(e, owner)]

    def close(self, episode_id: str) -> None:
        with self._lock:
            episode = self._episodes.pop(episode_id, None)
            self._unbind(episode_id)
        if episode is None:
            raise EpisodeNotFoundError(episode_id)
        self._closed([episode])

    def close_all(self) -> None:
        with self._lock:
            episodes = list(self._episodes.values())
            self._episodes.clear()
            self._bindings.clear()
        for episode in episodes:
            self.handles.forget_episode(episode.id)
        self._closed(episodes)

    def finished(self, episode: Episode) -> None:
        """An agent episode ended: its engine session closes (its record stays readable)."""
        episode.control.session.close()
        if self.on_close is not None:
            self.on_close()

    def __len__(self) -> int:
        return len(self._episodes)

    def _unbind(self, episode_id: str) -> None:
        self._bindings = {k: v for k, v in self._bindings.items() if v != episode_id}
        self.handles.forget_episode(episode_id)

    def _closed(self, episodes: Sequence[Episode]) -> None:
        for episode in episodes:
            _close(episode)
        if episodes and self.on_close is not None:
            self.on_close()

    def _make_room(self) -> None:
        while len(self._episodes) >= self.max_episodes:
            idle = next((e for e in self._episodes.values() if e.status != "running"), None)
            if idle is None:
                raise TooManyEpisodesError(f"all {self.max_episodes} episodes are running")
            del self._episodes[idle.id]
            self._unbind(idle.id)
            self._closed([idle])


def _visible(episode: Episode, owner: str | None) -> bool:
    return owner is None or secrets.compare_digest(episode.owner, owner)


def _close(episode: Episode) -> None:
    episode.events.close()
    episode.control.session.close()
