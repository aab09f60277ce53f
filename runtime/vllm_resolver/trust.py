"""The plugin's root of trust (`WEACT_ROOT`): nothing is made loadable that its keys did not
sign, whatever the registry says.

With a root (`registry.trust.TrustRoot`, the offline `root.json` nodes take as `--root`):

- a **channel revision** (a channel name's head, and every revision the follower's long-poll
  hears of) passes `runtime.trusted.verify_revision`, the nodes' own check, before any
  adapter of it is pulled or a served name moves to it. A revision that fails is refused:
  logged, said in the heartbeat's audit detail, and the channel's names stay on the last
  revision this process verified (the last verified library); none verified yet: refused.
  A refused revision is verified again after a backoff (0.5 s, doubling to 30 s: `recheck`,
  from the follower's loop), as nodes retry a failed sync: its approvers' signatures are
  stored after the promote (`weact promote --key`, then `weact channel sign` by a second
  approver, maybe much later), so one that lacked them when first heard counts once signed.
- a **version name** (`write@7`) is served only when the version is signed as an adapter of
  the plugin's channel (`WEACT_VLLM_CHANNEL`) must be: a trusted publisher and the channel's
  threshold of approvers (`runtime.trusted.verify_adapter`, the per-adapter part of the same
  check), so a candidate is never served with a root, even in evaluation mode. The engine
  process checks every load the same way (it does not know which name asked for a version),
  so channel names of other channels are refused: one channel per server.
- the highest revision verified is kept in `trust-state.json` in the library directory, so a
  replayed older revision is refused after a restart too (rollback); when the root names a
  timestamp role, a registry timestamp past its expiry makes the heartbeat say `stale` with
  the reason (freeze), as nodes do.

What is pulled is then the signed entry (manifest root; the pull checks every file against
its digest and the weights' root is recomputed), and the serve policy still applies to the
registry's state: a revoke takes the version out as without a root. Without a root every
method answers what the registry says (the plugin behaves as it did before roots).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from registry.client import Adapter, LibraryEntry, RegistryClient, Revision
from registry.errors import RegistryError, UntrustedError
from registry.trust import TrustRoot
from runtime.backoff import Backoff
from runtime.trusted import TrustState, check_freshness, verify_adapter, verify_revision
from runtime.vllm_resolver.log import get_logger

logger = get_logger(__name__)


def entry_of(adapter: Adapter) -> LibraryEntry:
    return {
        "adapter_id": adapter["id"],
        "name": adapter["name"],
        "manifest_root": adapter["manifest_root"],
        "files": adapter["files"],
    }


class Trust:
    """This process's verified channel revisions and refusals, under an optional root."""

    def __init__(
        self,
        client: Callable[[], RegistryClient],
        root: TrustRoot | None,
        channel: str = "prod",
        state: TrustState | None = None,
    ) -> None:
        self.client = client
        self.root = root
        self.state = state  # the highest revision verified, across restarts (rollback)
        self.channel = channel  # whose approvers a version name needs
        self._verified: dict[str, Revision] = {}  # channel -> the last revision verified
        self._refused: dict[str, str] = {}  # channel -> why its latest revision was refused
        self._refused_revision: dict[str, Revision] = {}  # channel -> that revision
        self._recheck: dict[str, tuple[Backoff, float]] = {}  # channel -> (backoff, when)
        self._lock = threading.Lock()

    def revision(self, revision: Revision) -> Revision:
        """`revision` when the root's keys signed it, else the channel's last verified
        revision (UntrustedError when there is none). Without a root: `revision`."""
        if self.root is None:
            return revision
        channel, number = revision["channel"], int(revision["revision"])
        with self._lock:
            last = self._verified.get(channel)
            if last == revision:
                return revision
            again = self._refused_revision.get(channel) == revision
            if again and not self._due(channel):  # checked: not again before its backoff
                if last is None:
                    raise UntrustedError(self._refused[channel])
                return last
            try:
                verify_revision(self.client(), revision, self.root, self.state)
            except UntrustedError as exc:
                if not again:
                    self._refused_revision[channel] = revision
                    self._recheck[channel] = (Backoff(0.5, 30.0), 0.0)
                backoff, _ = self._recheck[channel]
                self._recheck[channel] = (backoff, time.monotonic() + backoff.next())
                self._refuse(channel, str(exc), last)
                if last is None:
                    raise
                return last
            self._verified[channel] = revision
            self._refused_revision.pop(channel, None)
            self._recheck.pop(channel, None)
            if self._refused.pop(channel, None) is not None:
                logger.warning("channel %r revision %d verified: following it again",
                               channel, number)  # fmt: skip
            return revision

    def recheck(self) -> list[Revision]:
        """Refused revisions whose backoff passed, verified again: those that now count
        (their approvers' signatures arrived). Without a root: none."""
        with self._lock:
            due = [r for c, r in self._refused_revision.items() if self._due(c)]
        passed = []
        for revision in due:
            try:
                if self.revision(revision) == revision:
                    passed.append(revision)
            except (UntrustedError, RegistryError) as exc:  # none verified before it
                logger.debug("channel %r still refused: %s", revision["channel"], exc)
        return passed

    def _due(self, channel: str) -> bool:
        return time.monotonic() >= self._recheck[channel][1]

    def head(self, channel: str) -> Revision:
        """The channel's current revision, or its last verified one (see `revision`). With a
        root only the plugin's channel: the engine checks every load against its approvers."""
        if self.root is not None and channel != self.channel:
            raise UntrustedError(
                f"with WEACT_ROOT this server serves channel {self.channel!r} "
                f"(WEACT_VLLM_CHANNEL), not {channel!r}"
            )
        return self.revision(self.client().get_channel(channel))

    def version(self, adapter: Adapter) -> LibraryEntry:
        """The entry to pull for a version name; UntrustedError unless the root's keys
        signed it as an adapter of the plugin's channel."""
        entry = entry_of(adapter)
        if self.root is None:
            return entry
        try:
            verify_adapter(self.client(), self.root, self.channel, adapter["backbone"],
                           adapter["capability"], entry)  # fmt: skip
        except UntrustedError as exc:
            raise UntrustedError(
                f"{adapter['name']} is not signed as an adapter of channel {self.channel!r}: {exc}"
            ) from exc
        return entry

    def frozen(self) -> str:
        """Why the plugin's channel is stale for lack of a fresh registry timestamp (a frozen
        registry), or "" (also without a root, or when the root names no timestamp role)."""
        if self.root is None:
            return ""
        try:
            return check_freshness(self.client(), self.channel, self.root)
        except RegistryError as exc:
            logger.warning("timestamp check of channel %r failed: %s", self.channel, exc)
            return ""  # out of reach: the follower's own contact failure marks it stale

    def refusals(self) -> dict[str, str]:
        """Channel -> why its latest revision was refused (while it is the latest)."""
        with self._lock:
            return dict(self._refused)

    def _refuse(self, channel: str, why: str, last: Revision | None) -> None:
        if self._refused.get(channel) == why:
            return  # said once
        self._refused[channel] = why
        keeps = (
            f"; still serving revision {last['revision']}, the last verified"
            if last is not None
            else ""
        )
        logger.error("refusing a revision of channel %r (WEACT_ROOT): %s%s", channel, why, keeps)
