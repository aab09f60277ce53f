"""The runtime's link to the registry: pull a channel's library, report the engine audit.

Only `registry.client` is used (HTTP); the runtime never imports the registry's database,
services or API. `pull_library` resolves a channel's current revision and makes each of its
adapters a local PEFT directory `dest/<capability>@<version>/`, every file verified against
the registry's blob digest while it streams in (an adapter already there and verified is
neither downloaded nor hashed again: `runtime.verified`).
The returned `AdapterSpec`s carry the registry's manifest roots, so `PeftEngine` refuses
weights whose root differs from what the registry approved.

A failed pull raises before any spec is returned, so the caller's engine keeps serving its
previous library: a blob whose bytes do not hash to its digest is
`registry.errors.DigestMismatchError` (a server that aborts such a stream surfaces as a
`TransferError`); a registry that does not answer is `RegistryUnavailableError` (or its
`RegistryTimeoutError`); every failure is one of the client's typed `RegistryError`s.

    revision, specs = pull_library(client, "prod", Path("/var/lib/weact/adapters"))
    engine.set_library(specs)
    report = library_audit(engine.audit(), engine.adapters, revision)
    heartbeat(client, "node-1", "prod", revision["revision"], report)

`library_audit` is the node's audit: what is resident and offered to new episodes, checked
against the revision, not only the roots of what happens to be loaded.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from registry.client import (
    ADAPTER_FILES,
    LibraryEntry,
    Node,
    RegistryClient,
    Revision,
)
from registry.trust import TrustRoot
from runtime import verified
from runtime.engine import AdapterSpec, AuditReport
from runtime.progress import Steps, told
from runtime.trusted import TrustState, verify_revision

logger = logging.getLogger(__name__)


def pull_library(
    client: RegistryClient,
    channel: str,
    dest: Path,
    *,
    steps: Steps | None = None,
    trust: TrustRoot | None = None,
    trust_state: TrustState | None = None,
) -> tuple[Revision, list[AdapterSpec]]:
    """The channel's current revision and one spec per adapter, pulled and verified.

    Specs come in the revision's hard order, then any other capability by name. Each
    adapter is a step of the install, told to `steps` (silent when None). With `trust`
    (the node's root of trust), every adapter's signatures are checked first
    (`runtime.trusted`): an untrusted revision is `UntrustedError`, nothing pulled; with
    `trust_state` too, one older than the node verified before is refused.
    """
    revision = client.get_channel(channel)
    if trust is not None:
        verify_revision(client, revision, trust, trust_state)
    descriptions = {c["name"]: c["description"] for c in client.list_capabilities()}
    specs = []
    order = library_order(revision)
    label = f"install {channel} revision {revision['revision']}"
    with told(steps, label, len(order)) as step:
        for capability in order:
            entry = revision["library"][capability]
            step(f"{capability}: {entry['name']}")
            path = pull_entry(client, entry, Path(dest))
            specs.append(
                AdapterSpec(
                    name=capability,
                    path=str(path),
                    version=entry["name"],
                    manifest_root=entry["manifest_root"],
                    description=descriptions.get(capability, ""),
                )
            )
    return revision, specs


def library_order(revision: Revision) -> list[str]:
    """Capabilities of the library: the revision's order first, then the rest by name."""
    library = revision["library"]
    ordered = [c for c in revision["order"] if c in library]
    return ordered + sorted(set(library) - set(ordered))


def pull_entry(client: RegistryClient, entry: LibraryEntry, dest: Path) -> Path:
    """`dest/<name>/` holding the entry's files, verified; pulled only when not already so.

    Each file is hashed once, while it streams in, against the digest the library names;
    a copy already installed is trusted from the node's record (`runtime.verified`) and
    hashed again only when a file changed on disk since.
    """
    target = dest / entry["name"]
    if verified.is_verified(target, entry["files"], ADAPTER_FILES):
        logger.debug("adapter %s already pulled and verified", entry["name"])
        return target
    dest.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{entry['name']}.", dir=dest))
    try:
        pulled = client.pull_files(entry["files"], staging / "adapter")
        verified.record(pulled, entry["files"], ADAPTER_FILES)
        _replace(target, pulled)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    logger.info("pulled %s into %s", entry["name"], target)
    return target


def _replace(target: Path, new: Path) -> None:
    """Move `new` to `target`, removing a stale (unverified) copy first."""
    if target.exists():
        stale = target.with_name(f".{target.name}.stale")
        shutil.rmtree(stale, ignore_errors=True)
        target.rename(stale)
        shutil.rmtree(stale, ignore_errors=True)
    new.rename(target)


def library_audit(
    report: AuditReport, offered: Mapping[str, AdapterSpec], revision: Revision
) -> AuditReport:
    """The engine's audit checked against the revision the node serves.

    What new episodes are offered must be exactly the revision's library (no capability
    more, none less, each at the revision's version), and each offered adapter's root,
    recomputed from resident memory, must be the revision's. Older versions still resident
    for open episodes are named in the detail, not failures; the backbone must be the
    revision's.
    """
    library, number = revision["library"], revision["revision"]
    problems = []
    if report.backbone_root != revision["backbone"]:
        problems.append(f"backbone {report.backbone_root} != revision's {revision['backbone']}")
    problems += [f"{c!r} is offered but not in revision {number}" for c in offered.keys() - library]
    problems += [f"{c!r} of revision {number} is not offered" for c in library.keys() - offered]
    for capability in sorted(offered.keys() & library.keys()):
        entry, spec = library[capability], offered[capability]
        if spec.version != entry["name"]:
            problems.append(f"{capability!r} offers {spec.version}, revision {entry['name']}")
        resident = report.adapters.get(capability)
        if resident != entry["manifest_root"]:
            problems.append(
                f"{capability!r}: resident root {resident} != revision's {entry['manifest_root']}"
            )
    retained = sorted(report.adapters.keys() - offered.keys())
    notes = [f"resident for open episodes only: {', '.join(retained)}"] if retained else []
    detail = "; ".join(filter(None, [report.detail, *sorted(problems), *notes]))
    return AuditReport(report.ok and not problems, report.backbone_root, report.adapters, detail)


def audit_body(report: AuditReport) -> dict[str, Any]:
    """The heartbeat's `audit` object (CONTRACTS.md section 2)."""
    return {
        "ok": report.ok,
        "backbone_root": report.backbone_root,
        "adapters": dict(report.adapters),
        "detail": report.detail,
    }


def heartbeat(
    client: RegistryClient,
    node_id: str,
    channel: str,
    revision: int | None,
    report: AuditReport,
    status: Mapping[str, Any] | None = None,
) -> Node:
    """Post the engine audit for the revision this node serves; returns the registry's Node.

    `status`: `library_digest` of the revision served, `stale`, `lag` (see runtime.follow).
    """
    return client.heartbeat(
        node_id, channel=channel, revision=revision, audit=audit_body(report), status=status
    )
