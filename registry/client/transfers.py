"""Files in and out of the registry, verified: blob digests, atomic writes, PEFT directories.

Uploads name their sha256 (the server checks it while streaming). Downloads are hashed
while they stream to a temporary file beside the target, renamed into place only when the
digest matches. An adapter is pulled into a temporary folder that is renamed into place once
every file is verified; on any failure the target is left as it was.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from registry import errors

CHUNK_SIZE = 1024 * 1024
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
"""The two files of a standard PEFT LoRA directory that the registry stores."""
TRAINING_FILE = "training.json"  # what `weact train` writes beside the adapter
EXTRA_FILES = ("README.md", TRAINING_FILE)
"""Files beside them that travel with a version when present: the model card, the
training metadata (`weact train`)."""

ProgressCallback = Callable[[int, int], None]
"""Called with (bytes done, bytes total) as a transfer advances."""


def sha256_of_file(path: str | os.PathLike[str]) -> str:
    """sha256 (hex) of a file's bytes (as storage.digest does; the client imports no storage)."""
    with open(path, "rb", buffering=0) as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def read_chunks(
    path: str | os.PathLike[str], size: int, progress: ProgressCallback | None
) -> Iterator[bytes]:
    """A file's bytes in chunks, reporting progress against `size`."""
    done = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK_SIZE):
            done += len(chunk)
            if progress is not None:
                progress(done, size)
            yield chunk


def verified(
    digest: str, chunks: Iterable[bytes], total: int, progress: ProgressCallback | None
) -> Iterator[bytes]:
    """`chunks`, hashed as they pass; `DigestMismatchError` at the end if they are not `digest`."""
    hasher = hashlib.sha256()
    done = 0
    for chunk in chunks:
        hasher.update(chunk)
        done += len(chunk)
        if progress is not None:
            progress(done, total)
        yield chunk
    actual = hasher.hexdigest()
    if actual != digest:
        raise errors.DigestMismatchError(f"blob {digest}: downloaded bytes hash to {actual}")


def write_atomically(target: Path, chunks: Iterable[bytes]) -> Path:
    """Write `chunks` to a temporary file beside `target`, renamed to it once all are written."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return target


def adapter_paths(directory: Path) -> dict[str, Path]:
    """The PEFT files of `directory` by name; `InvalidError` naming any that is missing."""
    paths = {name: directory / name for name in ADAPTER_FILES}
    missing = [name for name, path in paths.items() if not path.is_file()]
    if missing:
        raise errors.InvalidError(
            f"{directory} is not a PEFT adapter directory: missing {', '.join(missing)}"
        )
    extra = {name: directory / name for name in EXTRA_FILES if (directory / name).is_file()}
    return paths | extra


@contextmanager
def staged_directory(target: Path) -> Iterator[Path]:
    """A temporary folder beside `target`, renamed to `target` when the block succeeds.

    `target` must not exist or be an empty directory, before and after the block; on any
    failure the folder is removed and `target` is left as it was.
    """
    check_free(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        yield staging
        check_free(target)
        if target.exists():
            target.rmdir()
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def check_free(target: Path) -> None:
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise FileExistsError(f"{target} exists and is not an empty directory")


def provenance_body(provenance: Mapping[str, Any] | None) -> dict[str, Any]:
    """An AdapterCreate provenance: the stated fields over the contract's defaults."""
    base: dict[str, Any] = {
        "data_digests": [],
        "capabilities": [],
        "replay": False,
        "trainer": {},
        "seed": None,
        "code_version": None,
    }
    base.update(provenance or {})
    return base


TRAINER_KEYS = (
    "settings",
    "peft",
    "samples",
    "steps",
    "sequential",
    "init",
    "roots",
    "distributed",
)


def training_provenance(training: Mapping[str, Any], capability: str) -> dict[str, Any]:
    """The provenance a `training.json` (written by `weact train`) states: the data files'
    digests, the capabilities its samples supervise, the trainer's settings and losses, the
    seed and the backbone it was trained on."""
    trainer: dict[str, Any] = {key: training.get(key) for key in TRAINER_KEYS}
    losses = training.get("losses") or []
    trainer["loss_first"] = losses[0] if losses else None
    trainer["loss_last"] = losses[-1] if losses else None
    trainer["backbone_root"] = training.get("backbone_root")
    return {
        "data_digests": [d["sha256"] for d in training.get("data", []) if "sha256" in d],
        "capabilities": list(training.get("covered", [capability])),
        "trainer": trainer,
        "seed": (training.get("settings") or {}).get("seed"),
    }
