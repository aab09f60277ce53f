"""The offline check of a pulled adapter directory (`weact verify DIR --root root.json`).

`weact adapter pull` writes the signatures the registry served beside the PEFT files, in
`signatures.json` (a list of DSSE envelopes). Here, without any registry: the manifest root
is computed from `adapter_model.safetensors`, the digest of `adapter_config.json` from its
bytes, and the publisher's statement naming exactly those must verify against the root (and,
with a channel, the channel's threshold of approvers').

    verdict = verify_directory(Path("write-copy"), TrustRoot.load(Path("root.json")), "prod")
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from registry.errors import UntrustedError
from registry.trust.policy import check_adapter
from registry.trust.root import TrustRoot
from registry.trust.statements import PUBLISH, AdapterIdentity, identity_of, parse_envelope
from storage.digest import sha256_file
from storage.manifest import manifest_of_path

SIGNATURES_FILE = "signatures.json"
CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"


def verify_directory(
    directory: Path,
    root: TrustRoot,
    channel: str | None = None,
    signatures: Path | None = None,
) -> dict[str, Any]:
    """What `directory` is and who signed it, or `UntrustedError`."""
    manifest_root = manifest_of_path(directory / WEIGHTS_FILE).root
    config = sha256_file(directory / CONFIG_FILE)
    source = signatures or directory / SIGNATURES_FILE
    try:
        envelopes = json.loads(source.read_text())
    except (OSError, ValueError) as exc:
        raise UntrustedError(f"no signatures to check in {source}: {exc}") from exc
    claimed = _claimed(envelopes, manifest_root, config)
    if claimed is None:
        raise UntrustedError(
            f"no publisher statement names these weights (manifest root {manifest_root})"
        )
    verdict = check_adapter(root, claimed, channel, envelopes)
    return {
        "capability": claimed.capability,
        "manifest_root": manifest_root,
        "backbone_root": claimed.backbone_root,
        "config": config,
        "channel": channel,
        "publishers": verdict.publishers,
        "approvers": verdict.approvers,
        "root_version": root.version,
    }


def _claimed(envelopes: Any, manifest_root: str, config: str) -> AdapterIdentity | None:
    """The identity a publisher's statement gives these files (capability, backbone)."""
    for data in envelopes if isinstance(envelopes, list) else []:
        try:
            predicate_type, identity = identity_of(parse_envelope(data))
        except UntrustedError:
            continue
        if predicate_type == PUBLISH and (identity.manifest_root, identity.config) == (
            manifest_root,
            config,
        ):
            return identity
    return None
