"""Is an adapter trusted for a channel? Checked against the offline root, never the registry.

`check_adapter(root, identity, channel, envelopes)` counts, over the envelopes served for the
adapter, the valid signatures (securesystemslib `Key.verify_signature` over DSSE's PAE) of
statements naming exactly `identity`, by keys of the root's roles:

- publish: the capability's publish role (or `publish:*`), its threshold (usually 1);
- approve: the channel's approve role (or `approve:*`), its threshold (the four-eyes rule).

A key counts once per role however many envelopes it signed. Falls short: `UntrustedError`
naming what is missing. `channel=None` checks the publisher only (a strict registry's push).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from securesystemslib.exceptions import UnverifiedSignatureError
from securesystemslib.signer import Key

from registry.errors import UntrustedError
from registry.trust.root import TrustRoot
from registry.trust.statements import (
    APPROVE,
    KIND_OF,
    PUBLISH,
    AdapterIdentity,
    identity_of,
    parse_envelope,
)


@dataclasses.dataclass(frozen=True)
class Verdict:
    publishers: list[str]  # keyids that validly signed as publishers
    approvers: list[str]  # keyids that validly signed as approvers of the channel


def signers_of(
    root: TrustRoot,
    identity: AdapterIdentity,
    predicate_type: str,
    keyids: set[str],
    envelopes: Iterable[Any],
) -> set[str]:
    """Keyids among `keyids` with a valid signature on a `predicate_type` statement of
    exactly `identity`."""
    found: set[str] = set()
    for data in envelopes:
        try:
            envelope = parse_envelope(data)
            kind, named = identity_of(envelope)
        except UntrustedError:
            continue
        if kind != predicate_type or not served_alike(named, identity):
            continue
        pae = envelope.pae()
        for keyid, signature in envelope.signatures.items():
            if keyid not in keyids or keyid in found:
                continue
            key: Key = root.key(keyid)
            try:
                key.verify_signature(signature, pae)
            except UnverifiedSignatureError:
                continue
            found.add(keyid)
    return found


def served_alike(named: AdapterIdentity, identity: AdapterIdentity) -> bool:
    """The same weights, applied the same way, on the same backbone, as the same capability;
    the parent (lineage) is compared by the registry when it stores a signature."""
    return dataclasses.replace(named, parent=None) == dataclasses.replace(identity, parent=None)


def check_adapter(
    root: TrustRoot, identity: AdapterIdentity, channel: str | None, envelopes: Iterable[Any]
) -> Verdict:
    envelopes = list(envelopes)
    label = f"{identity.capability} {identity.manifest_root[:12]}"
    publishers = _meet(root, identity, PUBLISH, identity.capability, envelopes, label)
    approvers: set[str] = set()
    if channel is not None:
        approvers = _meet(root, identity, APPROVE, channel, envelopes, label)
    return Verdict(sorted(publishers), sorted(approvers))


def _meet(
    root: TrustRoot,
    identity: AdapterIdentity,
    predicate_type: str,
    scope: str,
    envelopes: list[Any],
    label: str,
) -> set[str]:
    kind = KIND_OF[predicate_type]
    found = root.role_for(kind, scope)
    if found is None:
        raise UntrustedError(f"{label}: the root names no {kind} role for {scope!r}")
    name, role = found
    signed = signers_of(root, identity, predicate_type, set(role.keyids), envelopes)
    if len(signed) < role.threshold:
        raise UntrustedError(
            f"{label}: {len(signed)} of {role.threshold} {kind} signature(s) required by "
            f"root role {name} (root version {root.version})"
        )
    return signed
