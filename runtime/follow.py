"""A node that follows a registry channel: pull, swap, audit, heartbeat, in the background.

`start()` pulls the channel's current revision (every blob verified), loads it (the engine
refuses weights whose manifest root differs from the registry's), audits the resident
weights and posts a heartbeat; a failed audit raises `AuditMismatchError` and nothing is
served. A background thread then runs two loops:

- the watch: long-polls the channel (`registry.client.ChannelWatch`, cancellable). On a newer
  revision it pulls it, swaps the library in for new episodes (open ones finish on theirs),
  frees versions no episode uses any more, audits and heartbeats with the new revision. A
  failed pull, verification or load keeps the last good library: it is logged, reported in
  the heartbeat's audit detail, and retried after a backoff with jitter.
- the heartbeat: every `heartbeat_s`, the revision served, its library digest, the last
  audit, the lag behind the newest head seen and whether the node is `stale`.

`stale` means the latest attempt to reach the registry (long-poll, pull or heartbeat) failed,
or (with a root naming a timestamp role) the registry's signed timestamp of the channel has
expired: it stopped vouching that the revision is current (frozen). The node keeps serving
its last verified library and says so, with the reason, in its heartbeat and health. With a
root, the highest revision verified is kept in `dest/trust-state.json`: an older one is
refused, after a restart too (`runtime.trusted`).

    follower = ChannelFollower(client, engine, "prod", "node-1", Path("/var/lib/weact/lib"))
    follower.start()
    ...  # serve episodes from `engine`
    follower.stop()

`stop()` cancels the long-poll in flight (its connection closes at once) and returns within
`join_s`; a pull in progress finishes in the background but installs nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from registry.client import RegistryClient, Revision
from registry.errors import RegistryError, RegistryUnavailableError, StaleMetadataError
from registry.trust import TrustRoot
from runtime.backoff import Backoff
from runtime.engine import AdapterSpec, AuditReport
from runtime.errors import AuditMismatchError, BackboneMismatchError, RuntimeEngineError
from runtime.progress import Steps
from runtime.root_updates import RootChain
from runtime.sync import heartbeat, library_audit, pull_library
from runtime.trusted import STATE_FILE, TrustState, check_freshness

logger = logging.getLogger(__name__)

# what a sync attempt may fail with while the last good library keeps serving
SYNC_ERRORS = (RegistryError, OSError, RuntimeEngineError)


class LibraryEngine(Protocol):
    """The engine side of a follower (PeftEngine implements it)."""

    @property
    def adapters(self) -> Mapping[str, AdapterSpec]: ...

    def set_library(self, specs: Iterable[AdapterSpec]) -> None: ...

    def release_unused(self) -> list[str]: ...

    def audit(self) -> AuditReport: ...


@dataclasses.dataclass(frozen=True)
class FollowerStatus:
    """What a node says about its library: in its health and in every heartbeat."""

    channel: str
    node_id: str
    revision: int | None  # the revision served (last verified)
    library_digest: str | None
    head: int | None  # the newest revision the node has heard of
    lag: int | None  # head - revision
    stale: bool  # the latest attempt to reach the registry failed
    audit_ok: bool
    detail: str  # why the latest sync or contact failed, "" when it did not

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class ChannelFollower:
    """Keeps `engine`'s library on `channel`'s current revision."""

    def __init__(
        self,
        client: RegistryClient,
        engine: LibraryEngine,
        channel: str,
        node_id: str,
        dest: Path,
        wait_s: float = 30.0,
        *,
        retry_s: float = 1.0,
        max_backoff_s: float = 60.0,
        heartbeat_s: float = 10.0,
        join_s: float = 1.0,
        steps: Steps | None = None,
        trust: TrustRoot | RootChain | None = None,
    ) -> None:
        self.client = client
        self.engine = engine
        self.channel = channel
        self.node_id = node_id
        self.dest = Path(dest)
        self.wait_s = wait_s
        self.retry_s = retry_s
        self.max_backoff_s = max_backoff_s
        self.heartbeat_s = heartbeat_s
        self.join_s = join_s
        self.steps = steps  # told each install's steps (`pull_library`)
        # the node's root of trust: only signed revisions are installed; a RootChain also
        # takes the root rotations the registry serves (runtime.root_updates)
        self.trust = trust
        self.trust_state = TrustState.load(self.dest / STATE_FILE) if trust else None
        self.frozen = ""  # why the registry's timestamp is not fresh, "" when it is
        self.revision: int | None = None  # the revision served (last good)
        self.library_digest: str | None = None
        self.head: int | None = None
        self.stale = False
        self.last_error = ""  # why the latest sync attempt failed, "" when it did not
        self.report: AuditReport | None = None  # the latest audit
        self._served: Revision | None = None  # the revision whose library is offered
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._library_lock = threading.Lock()  # a swap and the revision it serves go together
        self._task_lock = threading.Lock()
        self._task: tuple[asyncio.AbstractEventLoop, asyncio.Task[None]] | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Serve the current revision (or raise), then follow the channel in the background."""
        if self._thread is not None:
            raise RuntimeError("follower already started")
        self._check_backbone(self.client.get_channel(self.channel))
        revision, specs = pull_library(self.client, self.channel, self.dest, **self._pull_options())
        report = self._install(revision, specs)
        if not report.ok:
            raise AuditMismatchError(f"refusing to serve {self._label(revision)}: {report.detail}")
        self._stop.clear()
        self._thread = threading.Thread(
            target=asyncio.run, args=(self._main(),), name=f"weact-follow-{self.channel}"
        )
        self._thread.daemon = True
        self._thread.start()

    def _pull_options(self) -> dict[str, Any]:
        return {"steps": self.steps, "trust": self._root(), "trust_state": self.trust_state}

    def _check_backbone(self, revision: Revision) -> None:
        """Refuse, before pulling or loading anything, a channel of another backbone: one
        line naming both roots first (`BackboneMismatchError`; `.details` has the rest),
        and a heartbeat that says so."""
        report = self.engine.audit()
        wanted = revision["backbone"]
        if report.backbone_root == wanted:
            return
        message = (
            f"backbone root {report.backbone_root}, channel {self.channel!r} wants {wanted} "
            f"(revision {revision['revision']}): start the node with the channel's backbone"
        )
        details = [f"this node's backbone: {self.engine_backbone_label()}"]
        try:
            known = self.client.get_backbone(wanted)
            details.append(
                f"the channel's backbone: {known['name']} ({known['tensor_count']} tensors)"
            )
        except RegistryError as exc:
            details.append(f"the channel's backbone: {exc}")
        self.report = dataclasses.replace(report, ok=False, detail=message)
        self._report()
        raise BackboneMismatchError(message, details)

    def engine_backbone_label(self) -> str:
        directory = getattr(self.engine, "backbone_dir", None)
        return str(directory) if directory is not None else type(self.engine).__name__

    def stop(self) -> None:
        """Stop following: the long-poll in flight is cancelled; returns within `join_s`."""
        with self._task_lock:
            self._stop.set()
            if self._task is not None:
                loop, task = self._task
                loop.call_soon_threadsafe(task.cancel)
        if self._thread is not None:
            self._thread.join(self.join_s)

    def sync(self) -> bool:
        """One attempt to serve the channel's current revision; False keeps the last good."""
        try:
            revision, specs = pull_library(
                self.client, self.channel, self.dest, **self._pull_options()
            )
            if self._stop.is_set():
                return True
            self._install(revision, specs)
        except SYNC_ERRORS as exc:
            self.last_error = f"sync of channel {self.channel!r} failed: {exc}"
            if isinstance(exc, RegistryUnavailableError):
                self.stale = True
            if isinstance(exc, StaleMetadataError):
                self.frozen = str(exc)
            logger.error("%s; still serving revision %s", self.last_error, self.revision)
            self._report()
            return False
        return True

    def _root(self) -> TrustRoot | None:
        """The root a revision is checked against, after the rotations the registry serves."""
        if isinstance(self.trust, RootChain):
            return self.trust.refresh(self.client)
        return self.trust

    @contextmanager
    def pinned(self) -> Iterator[int | None]:
        """Hold the library steady for the block (no swap); yields the revision it serves."""
        with self._library_lock:
            yield self.revision

    def health(self) -> dict[str, Any]:
        return self.status().to_json()

    def status(self) -> FollowerStatus:
        revision, head = self.revision, self.head
        lag = None if revision is None or head is None else max(head - revision, 0)
        return FollowerStatus(
            channel=self.channel,
            node_id=self.node_id,
            revision=revision,
            library_digest=self.library_digest,
            head=head,
            lag=lag,
            stale=self.stale or bool(self.frozen),
            audit_ok=self.report is not None and self.report.ok,
            detail="; ".join(filter(None, [self.last_error, self.frozen])),
        )

    # -- installing a revision -----------------------------------------------------------
    def _install(self, revision: Revision, specs: list[AdapterSpec]) -> AuditReport:
        """Make `specs` exactly the library of new episodes, free unused versions, audit
        and heartbeat."""
        with self._library_lock:
            self.engine.set_library(specs)
            self.revision = int(revision["revision"])
            self.library_digest = revision["library_digest"]
            self._served = revision
        self._saw(self.revision)
        self.last_error, self.stale = "", False
        report = self._audit(released=self.engine.release_unused())
        logger.info("serving %s (audit ok: %s)", self._label(revision), report.ok)
        return report

    def release(self) -> list[str]:
        """Episodes closed: free what no open episode uses any more, audit and heartbeat."""
        released = self.engine.release_unused()
        if released and self._served is not None:
            self._audit(released)
        return released

    def _audit(self, released: list[str]) -> AuditReport:
        """Audit what is resident and offered against the revision served; heartbeat it."""
        if released:
            logger.info("released %s", ", ".join(released))
        assert self._served is not None
        with self._library_lock:
            offered, revision = dict(self.engine.adapters), self._served
        report = library_audit(self.engine.audit(), offered, revision)
        self.report = report
        if not report.ok:
            logger.error("audit of %s failed: %s", self._label(revision), report.detail)
        self._report()
        return report

    def _saw(self, revision: int | None) -> None:
        if revision is not None and (self.head is None or revision > self.head):
            self.head = revision

    # -- reporting -----------------------------------------------------------------------
    def _report(self) -> None:
        """Post a heartbeat now; a registry out of reach makes the node stale, and so does
        an expired timestamp (with a root that names a timestamp role)."""
        self._check_fresh()
        report = self.report or self.engine.audit()
        if self.last_error or self.frozen:
            detail = "; ".join(filter(None, [report.detail, self.last_error, self.frozen]))
            report = dataclasses.replace(report, detail=detail)
        status = self.status()
        extra: dict[str, Any] = {"library_digest": status.library_digest, "lag": status.lag}
        extra |= {"stale": status.stale, "heartbeat_s": self.heartbeat_s}  # stale: 2 missed
        try:
            heartbeat(self.client, self.node_id, self.channel, status.revision, report, extra)
        except RegistryError as exc:
            self.stale = self.stale or isinstance(exc, RegistryUnavailableError)
            logger.warning("heartbeat of %s failed: %s", self.node_id, exc)
            return
        if self.stale and not self.last_error:
            self.stale = False  # the registry answers again

    def _check_fresh(self) -> None:
        if self.trust is None:
            return
        try:
            root = self._root()  # a RootChain takes the rotations served, every heartbeat
            frozen = check_freshness(self.client, self.channel, root) if root else ""
        except RegistryError as exc:  # out of reach, or a root refused: the next sync says so
            logger.warning("timestamp of channel %r unavailable: %s", self.channel, exc)
            return
        if frozen and frozen != self.frozen:
            logger.error("%s; node %s is stale", frozen, self.node_id)
        self.frozen = frozen

    # -- the background loops ------------------------------------------------------------
    async def _main(self) -> None:
        with self._task_lock:
            if self._stop.is_set():
                return
            task = asyncio.current_task()
            assert task is not None
            self._task = (asyncio.get_running_loop(), task)
        try:
            async with self.client.channel_watch() as watch:
                beats = asyncio.create_task(self._heartbeats())
                try:
                    await self._watch(watch)
                finally:
                    beats.cancel()
        except asyncio.CancelledError:
            logger.info("stopped following channel %r", self.channel)
        finally:
            with self._task_lock:
                self._task = None  # a second stop() finds no loop to call into

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            await asyncio.to_thread(self._report)

    async def _watch(self, watch: Any) -> None:
        backoff = Backoff(self.retry_s, max(self.retry_s, self.max_backoff_s))
        while not self._stop.is_set():
            try:
                newer = await watch.wait(self.channel, after=self.revision or 0, wait=self.wait_s)
            except RegistryError as exc:
                self.last_error = f"long-poll of channel {self.channel!r} failed: {exc}"
                self.stale = self.stale or isinstance(exc, RegistryUnavailableError)
                delay = backoff.next()
                logger.warning("%s; retrying in %.1f s", self.last_error, delay)
                await asyncio.sleep(delay)
                continue
            if newer is None:  # nothing newer: the registry answered, all is current
                self.stale, self.last_error = False, ""
                backoff.reset()
                continue
            self._saw(int(newer["revision"]))
            if await asyncio.to_thread(self.sync):
                backoff.reset()
            else:
                await asyncio.sleep(backoff.next())

    def _label(self, revision: Revision) -> str:
        return f"{self.channel} revision {revision['revision']}"
