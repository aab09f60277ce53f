"""Publish a trained adapter to the registry with its provenance, refusing replay.

The adapter directory written by `trainers.lora.train_lora` carries `training.json`: the
data files and their digests, the capabilities its samples supervise, hyper-parameters, seed,
the backbone's manifest root, the frozen roots checked after training and the job's world
size and launcher (`distributed`), which `provenance.trainer` carries. Publishing refuses
(ReplayError) unless `allow_replay`, then records `replay: true`, when
- the samples supervise another capability than the one published, or
- a data file was already used by the parent or one of its ancestors (old data replayed).
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
from registry.client.transfers import training_provenance
from storage.digest import sha256_file
from storage.errors import StorageError
from storage.manifest import manifest_of_path
from trainers.errors import AdapterSpecError, ReplayError, RootChangedError
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


def replay_reasons(
    training: Mapping[str, Any], capability: str, old_digests: set[str]
) -> list[str]:
    reasons = []
    others = sorted(set(training.get("covered", [])) - {capability})
    if others:
        reasons.append(f"the data supervises other capabilities: {others}")
    reused = sorted({d["sha256"] for d in training.get("data", [])} & old_digests)
    if reused:
        reasons.append(f"data already used by an ancestor: {reused}")
    return reasons


def ancestor_digests(client: RegistryClient, parent_id: int | None) -> set[str]:
    if parent_id is None:
        return set()
    lineage = client.lineage(parent_id)
    chain = [*lineage["ancestors"], lineage["adapter"]]
    return {d for a in chain for d in a["provenance"].get("data_digests", [])}


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
    reasons = replay_reasons(training, capability, ancestor_digests(client, parent_id))
    if reasons and not allow_replay:
        raise ReplayError(
            f"refusing to publish {capability!r} (use --allow-replay to record replay: true): "
            + "; ".join(reasons)
        )
    return client.push_adapter(
        directory,
        capability=capability,
        backbone=training["backbone_root"],
        parent_id=parent_id,
        label=label,
        provenance=provenance(training, capability, bool(reasons)),
        progress=progress,
        signer=signer,
    )
