"""A node that follows a registry channel: pull, swap, audit, heartbeat, in the background.

`start()` pulls the channel's current revision (every blob verified), loads it (the engine
refuses weights whose manifest root differs from the registry's), audits the resident
weights and posts a heartbeat; a failed audit raises `AuditMismatchError` and nothing is
served. A daemon thread then long-polls the channel. On a newer revision it pulls it, swaps
the library in for new episodes (open ones finish on theirs), frees versions no episode
uses any more, audits and heartbeats with the new revision. A failed pull, verification or
load keeps the last good library: it is logged, reported in the heartbeat's audit detail,
and retried after `retry_s`.

    follower = ChannelFollower(client, engine, "prod", "node-1", Path("/var/lib/weact/lib"))
    follower.start()
    ...  # serve episodes from `engine`
    follower.stop()

`stop()` returns at once (within `join_s`); a long-poll in flight is abandoned and the
thread, which acts on nothing after `stop()`, ends when that request returns.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from registry.client import RegistryClient, Revision
from registry.errors import RegistryError
from runtime.engine import AdapterSpec, AuditReport
from runtime.errors import AuditMismatchError, RuntimeEngineError
from runtime.sync import heartbeat, pull_library

logger = logging.getLogger(__name__)

# what a sync attempt may fail with while the last good library keeps serving
SYNC_ERRORS = (RegistryError, OSError, RuntimeEngineError)


class LibraryEngine(Protocol):
    """The engine side of a follower (PeftEngine implements it)."""

    @property
    def adapters(self) -> Mapping[str, AdapterSpec]: ...

    def swap_adapters(self, specs: Iterable[AdapterSpec]) -> None: ...

    def release_unused(self) -> list[str]: ...

    def audit(self) -> AuditReport: ...


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
        retry_s: float = 5.0,
        join_s: float = 1.0,
    ) -> None:
        self.client = client
        self.engine = engine
        self.channel = channel
        self.node_id = node_id
        self.dest = Path(dest)
        self.wait_s = wait_s
        self.retry_s = retry_s
        self.join_s = join_s
        self.revision: int | None = None  # the revision served (last good)
        self.last_error = ""  # why the latest sync attempt failed, "" when it did not
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._library_lock = threading.Lock()  # a swap and the revision it serves go together

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Serve the current revision (or raise), then follow the channel in the background."""
        if self._thread is not None:
            raise RuntimeError("follower already started")
        revision, specs = pull_library(self.client, self.channel, self.dest)
        report = self._install(revision, specs)
        if not report.ok:
            raise AuditMismatchError(f"refusing to serve {self._label(revision)}: {report.detail}")
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._follow, name=f"weact-follow-{self.channel}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop following; returns within `join_s` even while a long-poll is in flight."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.join_s)

    def sync(self) -> bool:
        """One attempt to serve the channel's current revision; False keeps the last good."""
        try:
            revision, specs = pull_library(self.client, self.channel, self.dest)
            if self._stop.is_set():
                return True
            self._install(revision, specs)
        except SYNC_ERRORS as exc:
            self.last_error = f"sync of channel {self.channel!r} failed: {exc}"
            logger.error("%s; still serving revision %s", self.last_error, self.revision)
            self._report(self.engine.audit(), self.revision)
            return False
        return True

    # -- internals -----------------------------------------------------------------------
    @contextmanager
    def pinned(self) -> Iterator[int | None]:
        """Hold the library steady for the block (no swap); yields the revision it serves."""
        with self._library_lock:
            yield self.revision

    def _install(self, revision: Revision, specs: list[AdapterSpec]) -> AuditReport:
        """Swap `specs` in for new episodes, free unused versions, audit and heartbeat."""
        with self._library_lock:
            self.engine.swap_adapters(specs)
            self.revision = int(revision["revision"])
        released = self.engine.release_unused()
        if released:
            logger.info("released %s", ", ".join(released))
        report = self._checked(self.engine.audit(), revision)
        self.last_error = ""
        logger.info("serving %s (audit ok: %s)", self._label(revision), report.ok)
        self._report(report, self.revision)
        return report

    def _checked(self, report: AuditReport, revision: Revision) -> AuditReport:
        """The audit, failed too when the resident backbone is not the revision's."""
        if report.backbone_root == revision["backbone"]:
            return report
        detail = f"backbone {report.backbone_root} != revision's {revision['backbone']}"
        return dataclasses.replace(
            report, ok=False, detail="; ".join(filter(None, [report.detail, detail]))
        )

    def _report(self, report: AuditReport, revision: int | None) -> None:
        if self.last_error:
            detail = "; ".join(filter(None, [report.detail, self.last_error]))
            report = dataclasses.replace(report, detail=detail)
        try:
            heartbeat(self.client, self.node_id, self.channel, revision, report)
        except RegistryError as exc:
            logger.warning("heartbeat of %s failed: %s", self.node_id, exc)

    def _follow(self) -> None:
        while not self._stop.is_set():
            try:
                newer = self.client.wait_for_channel(
                    self.channel, after=self.revision or 0, wait=self.wait_s
                )
            except RegistryError as exc:
                logger.warning("long-poll of channel %r failed: %s", self.channel, exc)
                self._stop.wait(self.retry_s)
                continue
            if newer is None or self._stop.is_set():
                continue
            if not self.sync():
                self._stop.wait(self.retry_s)

    def _label(self, revision: Revision) -> str:
        return f"{self.channel} revision {revision['revision']}"
