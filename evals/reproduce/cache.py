"""Trained adapters cached by a digest of their inputs: a second run trains nothing that did
not change.

An entry is the adapter directory `<root>/<name>-<key16>/` plus a sidecar
`<name>-<key16>.inputs.json` written only once the directory is complete, so a run killed
while training leaves no entry that a later run would trust. The key is the sha256 of the
canonical JSON of the inputs: data file digests, the backbone's manifest root, the root of
the adapter trained from, the settings, and the digest of the trainers' source.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import trainers

CONFIG_FILE = "adapter_config.json"
MODEL_CONFIG_FILE = "config.json"  # a fully fine-tuned backbone (Full SFT) is cached too


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_of(obj: Any) -> str:
    """sha256 of the canonical JSON of `obj`."""
    return sha256_bytes(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())


def file_digest(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def source_digest(files: Iterable[Path] | None = None) -> str:
    """The digest of the trainers' Python source (a change to the trainer retrains)."""
    root = Path(trainers.__file__).parent
    chosen = sorted(files if files is not None else root.glob("*.py"))
    return digest_of({p.name: file_digest(p) for p in chosen})


def adapter_root(path: str | Path) -> str:
    from storage.manifest import manifest_of_path

    return manifest_of_path(Path(path)).root


class AdapterCache:
    """`get(name, inputs, build)`: the cached directory, or `build(directory)` then cache it."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.reused: dict[str, bool] = {}

    def entry(self, name: str, inputs: Mapping[str, Any]) -> tuple[Path, Path]:
        key = digest_of(dict(inputs))[:16]
        return self.root / f"{name}-{key}", self.root / f"{name}-{key}.inputs.json"

    def get(self, name: str, inputs: Mapping[str, Any], build: Callable[[Path], None]) -> Path:
        target, sidecar = self.entry(name, inputs)
        complete = any((target / f).is_file() for f in (CONFIG_FILE, MODEL_CONFIG_FILE))
        if sidecar.is_file() and complete:
            self.reused[name] = True
            return target
        if target.exists():
            shutil.rmtree(target)  # an interrupted build
        build(target)
        sidecar.write_text(json.dumps(dict(inputs), indent=2, sort_keys=True) + "\n")
        self.reused[name] = False
        return target
