"""A node's check of a channel revision against its own root of trust (registry.trust).

Before a byte of a revision is pulled, `verify_revision` checks, by keys the node's root
(`--root root.json`) allows, and trusting nothing the registry says:

- the revision itself: its TUF targets metadata (registry.trust.channel) carries the
  channel's threshold of approver signatures (one suffices for a revision that only
  removes adapters from the last one this node verified), and its signed library,
  backbone and order are exactly those served;
- every adapter of its library: a trusted publisher's signature and the channel's
  threshold of approver signatures, all naming the adapter exactly as the revision does
  (capability, manifest root, the revision's backbone root, digest of adapter_config.json);
- with a `TrustState` (the node's memory, a JSON file in its state directory): the
  revision number is not lower than the highest this node verified (a replayed older
  revision, say one that still lists a since-revoked adapter, is refused, across restarts);
- when the root names a timestamp role: the registry's timestamp names exactly this
  revision and has not expired (`StaleMetadataError` when it has: a frozen registry).

The pull then checks each file against the digests the revision names, and the engine
recomputes the manifest root of the weights it loads, so what is served is what the keys
signed. `check_freshness` is the periodic check of a running node: the reason it is stale
when the registry stopped renewing its timestamp, else "".

    state = TrustState.load(Path("/var/lib/weact/lib/trust-state.json"))
    verify_revision(client, revision, root, state)   # or UntrustedError naming what is wrong
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from registry.client import RegistryClient, Revision
from registry.errors import StaleMetadataError, UntrustedError
from registry.trust import AdapterIdentity, TrustRoot, check_adapter
from registry.trust.channel import (
    check_timestamp,
    freshness_required,
    verify_revision_metadata,
    verify_timestamp,
)

logger = logging.getLogger(__name__)

CONFIG_FILE = "adapter_config.json"
STATE_FILE = "trust-state.json"


@dataclasses.dataclass
class TrustState:
    """What a node verified last, per channel: the highest revision and its library
    ({capability: manifest root}); saved to `path` (None: kept in memory only)."""

    path: Path | None = None
    channels: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)

    @classmethod
    def load(cls, path: Path) -> TrustState:
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            return cls(Path(path))
        except (OSError, ValueError) as exc:
            raise UntrustedError(f"{path}: unreadable trust state: {exc}") from exc
        return cls(Path(path), dict(data.get("channels", {})))

    def highest(self, channel: str) -> int:
        return int(self.channels.get(channel, {}).get("revision", 0))

    def library(self, channel: str) -> dict[str, str] | None:
        found = self.channels.get(channel)
        return None if found is None else dict(found["library"])

    def record(self, revision: Revision) -> None:
        channel, number = revision["channel"], int(revision["revision"])
        with self._lock:
            if number < self.highest(channel):
                return
            library = {c: e["manifest_root"] for c, e in revision["library"].items()}
            self.channels[channel] = {"revision": number, "library": library}
            if self.path is not None:
                self._save(self.path)

    def _save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps({"channels": self.channels}, indent=2, sort_keys=True))
        os.replace(temporary, path)


def verify_revision(
    client: RegistryClient,
    revision: Revision,
    root: TrustRoot,
    state: TrustState | None = None,
) -> None:
    """`revision` is signed as `root` requires for its channel, and (with `state`) no
    older than what this node verified; recorded in `state` when it passes."""
    started = time.perf_counter()
    channel, number = revision["channel"], int(revision["revision"])
    if state is not None and number < state.highest(channel):
        raise UntrustedError(
            f"{channel} revision {number} is older than revision {state.highest(channel)} "
            "this node already verified: a replayed revision (rollback) is refused"
        )
    _verify_adapters(client, revision, root)
    previous = state.library(channel) if state is not None else None
    try:
        metadata = client.revision_metadata(channel, number)
        verify_revision_metadata(root, revision, metadata, previous=previous)
        if freshness_required(root):
            timestamp = verify_timestamp(root, channel, client.channel_timestamp(channel))
            check_timestamp(timestamp, revision)
    except UntrustedError as exc:  # StaleMetadataError stays one
        raise type(exc)(f"{channel} revision {number} is not trusted: {exc}") from exc
    if state is not None:
        state.record(revision)
    logger.info(
        "%s revision %s: signed with %d adapters as root version %d requires (%.1f ms)",
        channel,
        number,
        len(revision["library"]),
        root.version,
        (time.perf_counter() - started) * 1000,
    )


def _verify_adapters(client: RegistryClient, revision: Revision, root: TrustRoot) -> None:
    channel, number = revision["channel"], revision["revision"]
    for capability, entry in sorted(revision["library"].items()):
        identity = AdapterIdentity(
            capability=capability,
            manifest_root=entry["manifest_root"],
            backbone_root=revision["backbone"],
            parent=None,  # lineage: checked by the registry when stored, not what is served
            config=entry["files"].get(CONFIG_FILE, ""),
        )
        envelopes = [s["envelope"] for s in client.list_signatures(entry["adapter_id"])]
        try:
            check_adapter(root, identity, channel, envelopes)
        except UntrustedError as exc:
            raise UntrustedError(
                f"{channel} revision {number}: {entry['name']} is not trusted: {exc}"
            ) from exc


def check_freshness(client: RegistryClient, channel: str, root: TrustRoot) -> str:
    """Why the node is stale for lack of a fresh timestamp ("" when fresh, or when the root
    names no timestamp role). A timestamp that does not verify is a reason too."""
    if not freshness_required(root):
        return ""
    try:
        verify_timestamp(root, channel, client.channel_timestamp(channel))
    except StaleMetadataError as exc:
        return str(exc)
    except UntrustedError as exc:
        return f"timestamp of channel {channel!r} refused: {exc}"
    return ""
