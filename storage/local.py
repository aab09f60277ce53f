"""Blobs in a local directory, sharded as `<root>/ab/cd/abcd...`.

A put streams into a unique temp file under `<root>/.tmp` (same filesystem), fsyncs it,
and renames it into place; the rename is atomic, so concurrent puts of one blob are safe
(the last rename wins with identical bytes) and readers never see a partial blob. Temp
files that a killed process left behind are swept when a store is opened (after a day).
Reading the source, hashing and writing overlap (storage.hashwrite; a file source is read
into reusable buffers); nothing is renamed before every chunk was written, the file
fsynced and the digest checked.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import unquote, urlparse

from storage.base import BaseBlobStore, BlobSource, check_expected
from storage.digest import check_sha256, is_sha256
from storage.errors import BlobNotFoundError, StoreUnavailableError
from storage.hashwrite import hash_and_write
from storage.inventory import StoredBlob, TempEntry

TMP_DIR = ".tmp"
STALE_TMP_SECONDS = 24 * 3600


class LocalBlobStore(BaseBlobStore):
    """A content-addressed blob directory."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self._tmp = self.root / TMP_DIR
        try:
            self._tmp.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            problem = f"cannot create {self._tmp}: {exc.strerror or exc}"
            raise StoreUnavailableError(self.url, problem) from exc
        self._sweep_tmp()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> LocalBlobStore:
        parsed = urlparse(url)
        path = unquote(parsed.path) if parsed.scheme == "file" else url
        return cls(path, **options)

    @property
    def url(self) -> str:
        return self.root.as_uri()

    def check(self) -> None:
        """The directory must take a file: write and remove one under its temp dir."""
        try:
            fd, name = tempfile.mkstemp(prefix="check-", dir=self._tmp)
            os.close(fd)
            os.unlink(name)
        except OSError as exc:
            raise StoreUnavailableError(self.url, f"not writable: {exc.strerror or exc}") from exc

    def path_of(self, digest: str) -> Path:
        """Where a blob lives (whether or not it exists)."""
        check_sha256(digest)
        return self.root / digest[:2] / digest[2:4] / digest

    def exists(self, digest: str) -> bool:
        return self.path_of(digest).is_file()

    def size(self, digest: str) -> int:
        try:
            return self.path_of(digest).stat().st_size
        except FileNotFoundError:
            raise BlobNotFoundError(digest, self.url) from None

    def delete(self, digest: str) -> None:
        try:
            self.path_of(digest).unlink()
        except FileNotFoundError:
            raise BlobNotFoundError(digest, self.url) from None

    def _open_raw(self, digest: str) -> BinaryIO:
        try:
            return open(self.path_of(digest), "rb", buffering=0)  # noqa: SIM115
        except FileNotFoundError:
            raise BlobNotFoundError(digest, self.url) from None

    def _sweep_tmp(self) -> None:
        """Remove temp files a killed process left behind (older than STALE_TMP_SECONDS)."""
        cutoff = time.time() - STALE_TMP_SECONDS
        for path in self._tmp.glob("put-*"):
            with contextlib.suppress(FileNotFoundError):
                if path.stat().st_mtime < cutoff:
                    path.unlink()

    def _put_new(self, src: BlobSource, expected: str | None) -> str:
        fd, tmp = tempfile.mkstemp(dir=self._tmp, prefix="put-")
        try:
            with os.fdopen(fd, "wb", buffering=0) as fh:
                digest, _ = hash_and_write(src, fh, writeback=True, name="put")
                os.fsync(fh.fileno())
            check_expected(digest, expected)
            final = self.path_of(digest)
            final.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(tmp, 0o444)
            os.replace(tmp, final)
            _fsync_dir(final.parent)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        return digest

    # -- inventory (storage.inventory.InventoriedStore) ---------------------------------

    def iter_blobs(self) -> Iterator[StoredBlob]:
        """Every stored blob (files at `ab/cd/<digest>` whose name is a digest)."""
        for path in self.root.glob("??/??/*"):
            if not is_sha256(path.name) or path.parent.parent.name != path.name[:2]:
                continue
            with contextlib.suppress(FileNotFoundError):
                stat = path.stat()
                yield StoredBlob(path.name, stat.st_size, stat.st_mtime)

    def iter_temp(self) -> Iterator[TempEntry]:
        """Temp files of puts in progress, or of puts whose process was killed."""
        for path in self._tmp.glob("put-*"):
            with contextlib.suppress(FileNotFoundError):
                stat = path.stat()
                yield TempEntry(path.name, stat.st_size, stat.st_mtime)

    def remove_temp(self, name: str) -> None:
        if "/" in name or not name.startswith("put-"):
            raise ValueError(f"not a temp file of this store: {name!r}")
        with contextlib.suppress(FileNotFoundError):
            (self._tmp / name).unlink()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
