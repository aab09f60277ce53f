"""Signed adapter identities: DSSE envelopes holding an in-toto Statement v1.

The identity of an adapter is what the registry already computes (its manifest root, the
canonical digest of its tensors), plus its capability, its backbone's manifest root, its
parent's manifest root and the digest of `adapter_config.json` (rank, alpha and target
modules decide how the weights apply). No second hash of the weights.

    identity = AdapterIdentity("write", manifest_root, backbone_root, None, config_digest)
    envelope = sign_identity(identity, PUBLISH, signer)   # a JSON-ready DSSE envelope
    identity_of(envelope, PUBLISH)                        # back, or UntrustedError

A publisher signs with `PUBLISH`, an approver with `APPROVE`: the predicate type says which,
inside the signed bytes, so a publisher's signature never counts as an approval.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

from securesystemslib.dsse import Envelope
from securesystemslib.signer import Signer

from registry.errors import UntrustedError

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PUBLISH = "https://weact.dev/adapter/publish/v1"
APPROVE = "https://weact.dev/adapter/approve/v1"
KIND_OF = {PUBLISH: "publish", APPROVE: "approve"}
PREDICATE_OF = {kind: predicate for predicate, kind in KIND_OF.items()}


@dataclasses.dataclass(frozen=True)
class AdapterIdentity:
    capability: str
    manifest_root: str
    backbone_root: str
    parent: str | None  # the parent's manifest root
    config: str  # sha256 of adapter_config.json

    def statement(self, predicate_type: str) -> dict[str, Any]:
        return {
            "_type": STATEMENT_TYPE,
            "subject": [{"name": self.capability, "digest": {"sha256": self.manifest_root}}],
            "predicateType": predicate_type,
            "predicate": {
                "backbone_root": self.backbone_root,
                "parent": self.parent,
                "config": self.config,
            },
        }


def sign_identity(identity: AdapterIdentity, predicate_type: str, signer: Signer) -> dict[str, Any]:
    """A DSSE envelope of the identity's statement, signed by `signer`."""
    payload = json.dumps(identity.statement(predicate_type), sort_keys=True).encode()
    envelope = Envelope(payload=payload, payload_type=PAYLOAD_TYPE, signatures={})
    envelope.sign(signer)
    return envelope.to_dict()


def parse_envelope(data: Any) -> Envelope:
    try:
        envelope = Envelope.from_dict(copy.deepcopy(dict(data)))  # from_dict pops fields
    except (ValueError, KeyError, TypeError) as exc:
        raise UntrustedError(f"not a DSSE envelope: {exc}") from exc
    if envelope.payload_type != PAYLOAD_TYPE:
        raise UntrustedError(f"envelope payload type {envelope.payload_type!r}")
    return envelope


def identity_of(envelope: Envelope) -> tuple[str, AdapterIdentity]:
    """(predicate type, identity) a statement names; its signatures are not checked here."""
    try:
        statement = json.loads(envelope.payload)
        (subject,) = statement["subject"]
        predicate = statement["predicate"]
        predicate_type = statement["predicateType"]
        identity = AdapterIdentity(
            capability=str(subject["name"]),
            manifest_root=str(subject["digest"]["sha256"]),
            backbone_root=str(predicate["backbone_root"]),
            parent=predicate.get("parent"),
            config=str(predicate["config"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise UntrustedError(f"not an adapter statement: {exc}") from exc
    if statement.get("_type") != STATEMENT_TYPE or predicate_type not in KIND_OF:
        raise UntrustedError(f"not an adapter statement: {statement.get('predicateType')!r}")
    return predicate_type, identity
