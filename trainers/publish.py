"""Publish a trained adapter to the registry with its provenance, refusing replay.

The adapter directory written by `trainers.lora.train_lora` carries `training.json`: the
data files and their digests, the capabilities its samples supervise, hyper-parameters, seed,
the backbone's manifest root, the frozen roots checked after training and the job's world
size and launcher (`distributed`), which `provenance.trainer` carries. Publishing refuses
replay (`registry.client.replay.refuse_replay`, the check `weact adapter push` of such a
directory runs too: `registry.errors.ReplayError`) unless `allow_replay`, then records
`replay: true`.
Before that, the manifest roots of the backbone and frozen adapter files used in training are
recomputed; any change raises RootChangedError. Nothing is uploaded when publishing is refused.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from securesystemslib.signer import Signer

from registry.client import Adapter, ProgressCallback, RegistryClient
from registry.client.replay import refuse_replay
from registry.client.transfers import training_provenance
from storage.digest import sha256_file
from storage.errors import StorageError
from storage.manifest import manifest_of_path
from trainers.errors import AdapterSpecError, RootChangedError
from trainers.lora import TRAINING_FILE


def data_record(paths: list[Path]) -> dict[str, Any]:
    """The `data` entry of training.json: each file's name and sha256."""
    return {"data": [{"path": os.fspath(p), "sha256": sha256_file(p)} for p in paths]}


def code_version() -> str | None:
    """`git describe` of the checkout the trainers run from, else the package version."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--tags"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        try:
            return metadata.version("weact")
        except metadata.PackageNotFoundError:
            return None


def read_training(directory: Path) -> dict[str, Any]:
    path = Path(directory) / TRAINING_FILE
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError) as exc:
        raise AdapterSpecError(f"{directory}: no readable {TRAINING_FILE} ({exc})") from None


def check_files_unchanged(training: Mapping[str, Any]) -> None:
    """The backbone and frozen adapters on disk still have the roots they had in training."""
    changed = {}
    for key, entry in training.get("files", {}).items():
        try:
            now = manifest_of_path(entry["path"]).root
        except (OSError, StorageError) as exc:
            now = f"<unreadable: {exc}>"
        if now != entry["root"]:
            changed[key] = (entry["root"], now)
    if changed:
        raise RootChangedError(changed)


def provenance(training: Mapping[str, Any], capability: str, replay: bool) -> dict[str, Any]:
    stated = training_provenance(training, capability)
    return {**stated, "replay": replay, "code_version": code_version()}


def publish_adapter(
    directory: str | os.PathLike[str],
    *,
    client: RegistryClient,
    capability: str,
    parent_id: int | None = None,
    label: str | None = None,
    allow_replay: bool = False,
    progress: ProgressCallback | None = None,
    signer: Signer | None = None,
) -> Adapter:
    """Upload and register the adapter; nothing is uploaded when it is refused. `progress`
    is told the bytes of each blob as it uploads; with `signer` (a publisher's key) the
    version's identity is signed as `RegistryClient.push_adapter` does (signed trust)."""
    directory = Path(directory)
    training = read_training(directory)
    check_files_unchanged(training)
    replay = refuse_replay(
        training,
        client=client,
        capability=capability,
        parent_id=parent_id,
        allow_replay=allow_replay,
    )
    return client.push_adapter(
        directory,
        capability=capability,
        backbone=training["backbone_root"],
        parent_id=parent_id,
        label=label,
        provenance=provenance(training, capability, replay),
        progress=progress,
        signer=signer,
    )
