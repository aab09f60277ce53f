"""Signing on the client side: a publisher's push, an approver's approval (registry.trust).

The private key never leaves this machine; what goes to the registry is a DSSE envelope of
the adapter's identity (registry.trust.statements).

- `pushed_identity`: the identity of a local PEFT directory, its manifest root computed
  here from the weights (not taken from the registry);
- `recorded_identity`: the identity of a registered version, from its record (an approver
  signs what the registry says it would serve: the root, digests and backbone it names).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from storage.manifest import manifest_of_path

if TYPE_CHECKING:  # registry.trust loads securesystemslib, tuf and boto3: only when signing
    from securesystemslib.signer import Signer

    from registry.trust.statements import AdapterIdentity

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"


class AdapterReader(Protocol):
    def get_adapter(self, adapter_id: int) -> Any: ...


def _parent_root(client: AdapterReader, parent_id: int | None) -> str | None:
    return None if parent_id is None else str(client.get_adapter(parent_id)["manifest_root"])


def pushed_identity(
    client: AdapterReader,
    directory: Path,
    *,
    capability: str,
    backbone_root: str,
    parent_id: int | None,
    files: dict[str, str],
) -> AdapterIdentity:
    from registry.trust.statements import AdapterIdentity

    return AdapterIdentity(
        capability=capability,
        manifest_root=manifest_of_path(directory / WEIGHTS_FILE).root,
        backbone_root=backbone_root,
        parent=_parent_root(client, parent_id),
        config=files[CONFIG_FILE],
    )


def recorded_identity(client: AdapterReader, adapter_id: int) -> AdapterIdentity:
    from registry.trust.statements import AdapterIdentity

    record = client.get_adapter(adapter_id)
    return AdapterIdentity(
        capability=record["capability"],
        manifest_root=record["manifest_root"],
        backbone_root=record["backbone"],
        parent=_parent_root(client, record["parent_id"]),
        config=record["files"][CONFIG_FILE],
    )


def signed_as_publisher(identity: AdapterIdentity, signer: Signer) -> dict[str, Any]:
    """The publisher's DSSE envelope of a pushed version's identity."""
    from registry.trust.statements import PUBLISH, sign_identity

    return sign_identity(identity, PUBLISH, signer)


def approval_envelope(client: AdapterReader, adapter_id: int, signer: Signer) -> dict[str, Any]:
    """An approver's DSSE envelope of the identity the registry records for a version."""
    from registry.trust.statements import APPROVE, sign_identity

    return sign_identity(recorded_identity(client, adapter_id), APPROVE, signer)
