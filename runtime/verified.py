"""A node's record of the adapter files it installed and verified, so that no file is hashed
again on every revision.

`pull_entry` downloads an adapter's files verified while they stream (each against the
registry's blob digest), then `record` notes, per file, the digest it matched and the file's
`stat` identity: size, mtime, ctime, inode and device. On the next revision `is_verified`
trusts a file whose identity is unchanged and hashes only the others (a match renews the
record; a mismatch has the adapter pulled again).

Why an unchanged identity is enough to skip the hash:

- every change through the filesystem moves the ctime: writing, truncating, `chmod`,
  `utime` (which can put the mtime back but sets the ctime to now), and a file renamed over
  this one has another inode. Userland cannot set a ctime.
- a change within the same clock tick as the write before it could keep the ctime. As git
  does with "racily clean" index entries, a file is trusted only when its ctime is strictly
  older than the record's own mtime: any later change then gets a ctime past the recorded
  one. `record` waits (a few milliseconds at most) until its file is newer than the files.

What it does not see, and who does: bytes changed beneath the filesystem (bit rot, writes to
the raw device, a clock set back) or by someone who can also rewrite this record. The record
only decides whether to download an adapter again. The engine hashes the tensors it loads
against the registry's manifest root at every load (`runtime.engines.peft.adapters`), and
the node's audit hashes the resident weights against the revision's roots after every
install; neither reads this record.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from registry.client import sha256_of_file

logger = logging.getLogger(__name__)

RECORD_FILE = ".weact-verified.json"
"""Beside the adapter's files; engines read only the files they know by name."""
MAX_RECORD_BYTES = 64 * 1024
RACY_WAIT_S = 0.1  # how long `record` waits for the clock to move past the files' ctimes


def is_verified(directory: Path, files: Mapping[str, str], names: Iterable[str]) -> bool:
    """Whether `directory` holds each of `names` with the digest `files` gives it.

    A file whose `stat` identity is the recorded one is not read; the others are hashed, and
    when all match the record is renewed so that the next call hashes nothing.
    """
    if not directory.is_dir():
        return False
    names = list(names)
    recorded, record_mtime = _load(directory)
    hashed = False
    try:
        for name in names:
            path, digest = directory / name, files[name]
            entry = recorded.get(name)
            if entry is not None and entry.get("sha256") == digest:
                st = os.stat(path)
                if _identity(st) == entry.get("stat") and st.st_ctime_ns < record_mtime:
                    continue
            if sha256_of_file(path) != digest:
                return False
            hashed = True
    except (OSError, KeyError):
        return False
    if hashed:
        record(directory, files, names)
    return True


def record(directory: Path, files: Mapping[str, str], names: Iterable[str]) -> None:
    """Note that `directory`'s `names` were just verified to hold the digests in `files`.

    Call it only right after the bytes were verified (hashed while downloaded, or re-hashed).
    """
    try:
        stats = {name: os.stat(directory / name) for name in names}
        body = {name: {"sha256": files[name], "stat": _identity(st)} for name, st in stats.items()}
        path = directory / RECORD_FILE
        tmp = path.with_name(f"{RECORD_FILE}.tmp")
        tmp.write_text(json.dumps({"files": body}, sort_keys=True))
        os.replace(tmp, path)
        _wait_until_newer(path, max((st.st_ctime_ns for st in stats.values()), default=0))
    except (OSError, KeyError) as exc:  # no record: hashed next time, nothing worse
        logger.warning("could not record verified files of %s: %s", directory, exc)


def _identity(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _wait_until_newer(path: Path, newest_ctime: int) -> None:
    """Touch `path` until its mtime is past `newest_ctime` (one clock tick, usually)."""
    deadline = time.monotonic() + RACY_WAIT_S
    while path.stat().st_mtime_ns <= newest_ctime and time.monotonic() < deadline:
        time.sleep(0.001)
        os.utime(path)


def _load(directory: Path) -> tuple[dict[str, Any], int]:
    """The recorded entries and the record's mtime; nothing when it is absent or unreadable."""
    path = directory / RECORD_FILE
    try:
        with open(path, "rb") as fh:
            mtime = os.fstat(fh.fileno()).st_mtime_ns
            data = json.loads(fh.read(MAX_RECORD_BYTES))
        entries = data["files"]
        if not isinstance(entries, dict):
            return {}, 0
        return {k: v for k, v in entries.items() if isinstance(v, dict)}, mtime
    except (OSError, ValueError, KeyError, TypeError):
        return {}, 0
