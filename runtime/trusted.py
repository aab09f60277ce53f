"""A node's check of a channel revision against its own root of trust (registry.trust).

Before a byte of a revision is pulled, every adapter of its library must carry, among the
signatures the registry serves, a trusted publisher's signature and the channel's threshold
of approver signatures, by keys the node's root (`--root root.json`) allows, all naming the
adapter exactly as the revision does: capability, manifest root, the revision's backbone
root and the digest of adapter_config.json. The pull then checks each file against the
digests the revision names, and the engine recomputes the manifest root of the weights it
loads, so what is served is what the keys signed; the registry vouches for nothing.

    verify_revision(client, revision, root)   # or UntrustedError naming what is missing
    verify_adapter(client, root, channel, backbone, capability, entry)   # one of them
"""

from __future__ import annotations

import logging
import time

from registry.client import LibraryEntry, RegistryClient, Revision
from registry.errors import UntrustedError
from registry.trust import AdapterIdentity, TrustRoot, check_adapter

logger = logging.getLogger(__name__)

CONFIG_FILE = "adapter_config.json"


def verify_revision(client: RegistryClient, revision: Revision, root: TrustRoot) -> None:
    """Every adapter of `revision` is signed as `root` requires for its channel."""
    started = time.perf_counter()
    channel, number = revision["channel"], revision["revision"]
    for capability, entry in sorted(revision["library"].items()):
        try:
            verify_adapter(client, root, channel, revision["backbone"], capability, entry)
        except UntrustedError as exc:
            raise UntrustedError(
                f"{channel} revision {number}: {entry['name']} is not trusted: {exc}"
            ) from exc
    logger.info(
        "%s revision %s: %d adapters signed as root version %d requires (%.1f ms)",
        channel,
        number,
        len(revision["library"]),
        root.version,
        (time.perf_counter() - started) * 1000,
    )


def verify_adapter(
    client: RegistryClient,
    root: TrustRoot,
    channel: str,
    backbone: str,
    capability: str,
    entry: LibraryEntry,
) -> None:
    """One adapter, named as `entry` does, is signed as `root` requires for `channel`: the
    check of each adapter of a revision (the vLLM plugin's check of a version name)."""
    identity = AdapterIdentity(
        capability=capability,
        manifest_root=entry["manifest_root"],
        backbone_root=backbone,
        parent=None,  # lineage: checked by the registry when stored, not what is served
        config=entry["files"].get(CONFIG_FILE, ""),
    )
    envelopes = [s["envelope"] for s in client.list_signatures(entry["adapter_id"])]
    check_adapter(root, identity, channel, envelopes)
