"""The API server follows the registry for what it serves: no operator in the loop.

A background thread (its own event loop) runs three things:

- a long-poll per channel whose names are served (`registry.client.ChannelWatch`, as
  runtime nodes follow their channel): when the channel moves (promote, rollback, a revoke
  that took a version out of it) every `channel/capability` whose head changed is dropped;
- every `check_s` (1 s) the state of every version served or pulled: a name whose version
  the serve policy no longer allows (revoked, rejected; a candidate outside evaluation mode)
  is dropped, and the files of revoked and rejected versions are deleted from the library;
- a heartbeat every `heartbeat_s` (and after each change) as node `node_id`: the names
  served with the version and verified manifest root of each, the last check, `stale`.

With a root of trust (`trust.Trust`, `WEACT_ROOT`) a revision the long-poll hears of moves
nothing until it passes `runtime.trusted.verify_revision`: one that fails is refused (logged,
and said in every heartbeat's audit detail while it is the channel's latest), and the
channel's names stay bound to the last verified revision's versions.

Dropping a name removes it from vLLM's table of served names (`drop`, on the server's own
loop, under vLLM's per-name lock): requests in flight finish on the LoRA they hold; the next
request for the name resolves again (a channel name to its new head, a revoked version to
404).
"""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from registry.client import RegistryClient, Revision
from registry.errors import RegistryError, RegistryUnavailableError, UntrustedError
from runtime.backoff import Backoff
from runtime.vllm_resolver.log import get_logger
from runtime.vllm_resolver.policy import CandidateMode, ServedName, deletable, names_to_drop
from runtime.vllm_resolver.served import ServedTable
from runtime.vllm_resolver.trust import Trust

logger = get_logger(__name__)
Heads = dict[tuple[str, str], str | None]


def heads_of(revision: Revision, served: Iterable[ServedName]) -> Heads:
    """(channel, capability) -> the version `revision` serves, for the served channel names."""
    channel, library = revision["channel"], revision["library"]
    return {
        (channel, b.capability): (
            library[b.capability]["name"] if b.capability in library else None
        )
        for b in served
        if b.channel == channel and b.capability is not None
    }


class ServedFollower:
    def __init__(
        self,
        client: Callable[[], RegistryClient],
        table: ServedTable,
        drop: Callable[[Mapping[str, ServedName]], None],
        *,
        mode: CandidateMode,
        library_dir: Path,
        node_id: str,
        channel: str,
        check_s: float = 1.0,
        wait_s: float = 30.0,
        heartbeat_s: float = 10.0,
        loaded: Callable[[], set[str]] | None = None,
        trust: Trust | None = None,
    ) -> None:
        self.client = client
        self.table = table
        self.drop = drop
        self.mode = mode
        self.library_dir = Path(library_dir)
        self.node_id = node_id
        self.channel = channel
        self.check_s, self.wait_s, self.heartbeat_s = check_s, wait_s, heartbeat_s
        self.loaded = loaded  # the names vLLM holds now (None: all in the table)
        self.trust = trust or Trust(client, None)
        self.last_check: float | None = None
        self.stale = False
        self._lock = threading.Lock()  # one check at a time
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), daemon=True,
                                        name="weact-vllm-follow")  # fmt: skip
        self._thread.start()

    def stop(self, join_s: float = 10.0) -> None:
        """Stop following; returns once the thread has ended (at most `join_s`), so that no
        check nor heartbeat runs on a client its owner closes next."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(join_s)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- one round -------------------------------------------------------------------------
    def check(self, heads: Heads | None = None) -> dict[str, str]:
        """Check states (and `heads`, from a channel that moved); drop and delete. name -> why."""
        with self._lock:
            served, pulled = self.table.snapshot(), self.table.pulled()
            ids = {b.adapter_id for b in served.values()} | set(pulled)
            try:
                states = self.client().adapter_states(sorted(ids)) if ids else {}
            except RegistryError as exc:
                self._contact_failed("state check", exc)
                return {}
            self.last_check, self.stale = time.time(), False
            drops = names_to_drop(served, states, heads or {}, self.mode)
            if drops:
                bindings = {name: served[name] for name in drops}
                self.drop(bindings)
                self.table.remove(bindings.values())
                for name, why in sorted(drops.items()):
                    logger.warning("no longer serving %r: %s", name, why)
            self._delete(deletable(states, pulled), pulled)
        if drops:
            self.heartbeat()
        return drops

    def _delete(self, versions: list[str], pulled: Mapping[int, str]) -> None:
        for version in versions:
            shutil.rmtree(self.library_dir / version, ignore_errors=True)
            logger.warning("deleted the files of %s from %s", version, self.library_dir)
        self.table.forget_files(i for i, v in pulled.items() if v in versions)

    def _contact_failed(self, what: str, exc: RegistryError) -> None:
        self.stale = self.stale or isinstance(exc, RegistryUnavailableError)
        logger.warning("%s against the registry failed: %s", what, exc)

    # -- heartbeat -------------------------------------------------------------------------
    def heartbeat(self) -> dict[str, Any] | None:
        served = self.table.snapshot()
        if self.loaded is not None:
            names = self.loaded()
            served = {n: b for n, b in served.items() if n in names}
        channels = {b.channel for b in served.values() if b.channel}
        channel = channels.pop() if len(channels) == 1 else self.channel
        revisions = [b.revision for b in served.values() if b.channel == channel and b.revision]
        last = (
            datetime.fromtimestamp(self.last_check, UTC).isoformat(timespec="seconds")
            if self.last_check else "never"
        )  # fmt: skip
        serves = ", ".join(f"{n} -> {b.version}" for n, b in sorted(served.items())) or "nothing"
        refused = "".join(f"; refused: {why}" for _, why in sorted(self.trust.refusals().items()))
        frozen = self.trust.frozen()
        refused += f"; stale: {frozen}" if frozen else ""
        audit = {
            "ok": True,
            "adapters": {n: b.manifest_root for n, b in served.items()},
            "detail": f"vLLM server with the WeAct registry plugin; serves {serves}; "
            f"last check {last}{refused}"[:4096],
        }
        try:
            return dict(self.client().heartbeat(
                self.node_id, channel=channel, revision=max(revisions, default=None),
                audit=audit, status={"stale": self.stale or bool(frozen)},
            ))  # fmt: skip
        except RegistryError as exc:
            self._contact_failed(f"heartbeat of {self.node_id}", exc)
            return None

    # -- the loops ---------------------------------------------------------------------------
    async def _main(self) -> None:
        watchers: dict[str, asyncio.Task[None]] = {}
        beat_at = 0.0
        async with self.client().channel_watch() as watch:
            while not self._stop.is_set():
                channels = self.table.channels()
                for name, revision in channels.items():
                    if name not in watchers or watchers[name].done():
                        watchers[name] = asyncio.create_task(self._watch(watch, name, revision))
                for name in set(watchers) - set(channels):
                    watchers.pop(name).cancel()
                await asyncio.to_thread(self.check)
                for verified in await asyncio.to_thread(self.trust.recheck):  # signed since
                    heads = heads_of(verified, self.table.snapshot().values())
                    await asyncio.to_thread(self.check, heads)
                    beat_at = 0.0  # say it follows the revision again
                if time.monotonic() >= beat_at:
                    await asyncio.to_thread(self.heartbeat)
                    beat_at = time.monotonic() + self.heartbeat_s
                await asyncio.sleep(self.check_s)
            for task in watchers.values():
                task.cancel()

    async def _watch(self, watch: Any, channel: str, after: int) -> None:
        backoff = Backoff(1.0, 30.0)
        while not self._stop.is_set():
            try:
                newer = await watch.wait(channel, after=after, wait=self.wait_s)
            except RegistryError as exc:
                self._contact_failed(f"long-poll of channel {channel!r}", exc)
                await asyncio.sleep(backoff.next())
                continue
            backoff.reset()
            if newer is None:
                continue
            after = int(newer["revision"])
            # the resolver's reads must not go back behind what the long-poll answered
            self.client().seen.saw(channel, after)
            logger.info("channel %r moved to revision %d", channel, after)
            try:  # with a root: the revision if signed, else the last verified one
                verified = await asyncio.to_thread(self.trust.revision, newer)
            except (UntrustedError, RegistryError) as exc:
                self._contact_failed(f"verifying revision {after} of channel {channel!r}", exc)
                continue
            heads = heads_of(verified, self.table.snapshot().values())
            await asyncio.to_thread(self.check, heads)
            if verified is not newer:
                await asyncio.to_thread(self.heartbeat)  # says it refused the revision
