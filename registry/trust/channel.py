"""Signed channel revisions and their timestamps: python-tuf `Targets` and `Timestamp`.

Revision N of channel C is a TUF `Targets` document of version N: one target per
capability (its path the capability, its sha256 the adapter's manifest root, the adapter's
name and file digests beside them), the channel, backbone root and library order in the
`x-weact-channel` field, and an expiry one year after the revision was made. Every field
comes from the revision as the registry serves it, so a signer and a node build the same
bytes: approvers sign it (`sign_revision`), the registry stores their signatures, and a
node checks them with `verify_revision_metadata`:

- it counts when the channel's approve role (`approve:C`, else `approve:*`) reached its
  threshold of valid signatures under the node's root;
- a revision that only removes adapters from the last one the node verified (same manifest
  root for each capability it keeps) counts with one approver signature: revoking needs no
  second person, adding or changing an adapter always does.

Freshness is a TUF `Timestamp` signed by the registry's online key (the root's `timestamp`
role): it names the channel (`x-weact-channel`), its current revision as the `MetaFile`
version and the sha256 of that revision's signed bytes, and expires soon (a day by
default). A registry that stops publishing cannot renew it; `verify_timestamp` raises
`StaleMetadataError` once it has expired.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from securesystemslib.exceptions import UnverifiedSignatureError
from securesystemslib.signer import Signature, Signer
from tuf.api.exceptions import RepositoryError
from tuf.api.metadata import Metadata, MetaFile, TargetFile, Targets, Timestamp

from registry.errors import StaleMetadataError, UntrustedError
from registry.trust.root import TrustRoot

CHANNEL_FIELD = "x-weact-channel"
REVISION_EXPIRY = timedelta(days=365)
TIMESTAMP_ROLE = "timestamp"


def _utc(value: Any) -> datetime:
    when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).replace(microsecond=0)


def revision_targets(revision: Mapping[str, Any]) -> Targets:
    """The signed part of a revision (a registry `Revision` as served, or its fields)."""
    targets = {
        capability: TargetFile(
            length=0,  # the manifest root identifies the weights; files carry their digests
            hashes={"sha256": str(entry["manifest_root"])},
            path=capability,
            unrecognized_fields={"adapter": str(entry["name"]), "files": dict(entry["files"])},
        )
        for capability, entry in sorted(revision["library"].items())
    }
    channel = {
        "channel": str(revision["channel"]),
        "backbone_root": str(revision["backbone"]),
        "order": list(revision["order"]),
    }
    return Targets(
        version=int(revision["revision"]),
        expires=_utc(revision["created_at"]) + REVISION_EXPIRY,
        targets=targets,
        unrecognized_fields={CHANNEL_FIELD: channel},
    )


def revision_digest(revision: Mapping[str, Any]) -> str:
    """sha256 of the revision's signed bytes (what a timestamp names; signatures aside, so
    a co-signature does not change it)."""
    return hashlib.sha256(Metadata(revision_targets(revision)).signed_bytes).hexdigest()


def sign_revision(revision: Mapping[str, Any], signer: Signer) -> dict[str, Any]:
    """An approver's signature of the revision (`{"keyid", "sig"}`, as TUF writes one)."""
    metadata = Metadata(revision_targets(revision))
    return metadata.sign(signer).to_dict()


def revision_metadata(
    revision: Mapping[str, Any], signatures: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The revision's TUF metadata with the signatures stored for it."""
    metadata = Metadata(revision_targets(revision))
    for data in signatures:
        signature = Signature.from_dict(dict(data))
        metadata.signatures[signature.keyid] = signature
    return metadata.to_dict()


def parse_targets(data: Any) -> Metadata[Targets]:
    try:
        metadata = Metadata[Targets].from_dict(copy.deepcopy(dict(data)))
    except (ValueError, KeyError, TypeError, RepositoryError) as exc:
        raise UntrustedError(f"not channel revision metadata: {exc}") from exc
    if not isinstance(metadata.signed, Targets):
        raise UntrustedError("not channel revision metadata (targets)")
    return metadata


def revision_signers(root: TrustRoot, channel: str, metadata: Metadata[Targets]) -> set[str]:
    """Keyids of the channel's approve role with a valid signature on `metadata`."""
    found = root.role_for("approve", channel)
    if found is None:
        return set()
    keyids, payload, signed = set(found[1].keyids), metadata.signed_bytes, set()
    for keyid, signature in metadata.signatures.items():
        if keyid not in keyids:
            continue
        try:
            root.key(keyid).verify_signature(signature, payload)
        except UnverifiedSignatureError:
            continue
        signed.add(keyid)
    return signed


def removes_only(library: Mapping[str, Any], previous: Mapping[str, str] | None) -> bool:
    """The library keeps a strict subset of `previous` ({capability: manifest root})."""
    if previous is None or len(library) >= len(previous):
        return False
    return all(previous.get(c) == e["manifest_root"] for c, e in library.items())


def verify_revision_metadata(
    root: TrustRoot,
    revision: Mapping[str, Any],
    data: Any,
    *,
    previous: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> set[str]:
    """The approvers whose signatures make `revision` count, or `UntrustedError`.

    `data` is the metadata the registry served; its signed part must be exactly the
    revision served (library, backbone, order, version). `previous` is the library of the
    last revision the caller verified: a revision that only removes from it needs one
    approver signature instead of the channel's threshold."""
    channel, number = str(revision["channel"]), int(revision["revision"])
    label = f"{channel} revision {number}"
    metadata = parse_targets(data)
    if metadata.signed.to_dict() != revision_targets(revision).to_dict():
        raise UntrustedError(f"{label}: the signed revision differs from the one served")
    if metadata.signed.is_expired(now):
        raise UntrustedError(f"{label}: its signature expired at {metadata.signed.expires}")
    found = root.role_for("approve", channel)
    if found is None:
        raise UntrustedError(f"{label}: the root names no approve role for {channel!r}")
    name, role = found
    signed = revision_signers(root, channel, metadata)
    needed = 1 if removes_only(revision["library"], previous) else role.threshold
    if len(signed) < needed:
        raise UntrustedError(
            f"{label}: {len(signed)} of {needed} approver signature(s) of the revision "
            f"required by root role {name} (root version {root.version})"
        )
    return signed


# -- timestamps ------------------------------------------------------------------------------
def make_timestamp(
    revision: Mapping[str, Any], signer: Signer, *, expires_s: float, version: int
) -> dict[str, Any]:
    """A timestamp of the channel's current `revision`, signed by the registry's key."""
    expires = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=expires_s)
    timestamp = Timestamp(
        version=version,
        expires=expires,
        snapshot_meta=MetaFile(
            version=int(revision["revision"]), hashes={"sha256": revision_digest(revision)}
        ),
        unrecognized_fields={CHANNEL_FIELD: {"channel": str(revision["channel"])}},
    )
    metadata = Metadata(timestamp)
    metadata.sign(signer)
    return metadata.to_dict()


def freshness_required(root: TrustRoot) -> bool:
    """Whether the root names timestamp keys (then nodes require fresh timestamps)."""
    return bool(root.root.roles[TIMESTAMP_ROLE].keyids)


def verify_timestamp(
    root: TrustRoot, channel: str, data: Any, *, now: datetime | None = None
) -> Timestamp:
    """A timestamp of `channel` signed by the root's timestamp role and not expired:
    `UntrustedError` when not signed so, `StaleMetadataError` when expired (a frozen
    registry)."""
    try:
        metadata = Metadata[Timestamp].from_dict(copy.deepcopy(dict(data)))
    except (ValueError, KeyError, TypeError, RepositoryError) as exc:
        raise UntrustedError(f"not a timestamp of channel {channel!r}: {exc}") from exc
    if not isinstance(metadata.signed, Timestamp):
        raise UntrustedError(f"not a timestamp of channel {channel!r}")
    result = root.root.get_verification_result(
        TIMESTAMP_ROLE, metadata.signed_bytes, metadata.signatures
    )
    if not result.verified:
        raise UntrustedError(
            f"timestamp of {channel!r}: {len(result.signed)} of {result.threshold} signature(s)"
            f" of the root's timestamp role (root version {root.version})"
        )
    named = metadata.signed.unrecognized_fields.get(CHANNEL_FIELD, {}).get("channel")
    if named != channel:
        raise UntrustedError(f"a timestamp of channel {named!r} served for {channel!r}")
    if metadata.signed.is_expired(now):
        raise StaleMetadataError(
            f"the registry's timestamp of channel {channel!r} expired at "
            f"{metadata.signed.expires.isoformat()}: no fresh word that revision "
            f"{metadata.signed.snapshot_meta.version} is still current (registry frozen?)"
        )
    return metadata.signed


def check_timestamp(timestamp: Timestamp, revision: Mapping[str, Any]) -> None:
    """The timestamp names exactly `revision` (its number and signed bytes)."""
    meta, number = timestamp.snapshot_meta, int(revision["revision"])
    if meta.version != number or (meta.hashes or {}).get("sha256") != revision_digest(revision):
        raise UntrustedError(
            f"{revision['channel']} revision {number} is not the one the timestamp names "
            f"(revision {meta.version})"
        )
