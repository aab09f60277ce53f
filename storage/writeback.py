"""Writing a file that will be fsynced, with the disk writes started as it grows.

An fsync after writing a large file waits for the whole file to reach the disk. Starting
the writeback of each written range at once (Linux `sync_file_range(SYNC_FILE_RANGE_WRITE)`,
asynchronous, as PostgreSQL's `*_flush_after` settings do) lets the disk work while the
rest is still being read and hashed, so the final fsync waits only for the last range. It
is only a hint: the final fsync is still what makes the file durable, and where the call is
missing (not Linux) or fails, nothing changes but the timing.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable
from typing import BinaryIO

from storage.pipeline import Chunk

WRITEBACK_BYTES = 16 * 1024 * 1024
"""Start the writeback of what was written each time this many bytes have piled up."""
WRITE_PIECE = 512 * 1024
"""The most bytes one write() call is given. Large writes into the page cache cost several
times the CPU of the same bytes in smaller ones here (Linux 6.18, ext4, which allocates
page-cache folios to the size of the write): 512 MiB in 2 MiB or 8 MiB writes took 0.6-0.9 s
of CPU, in 128 KiB to 1 MiB writes 0.18-0.25 s, as much as `cp` (0.24 s). Above a few
hundred KiB the syscall count no longer matters."""

_SYNC_FILE_RANGE_WRITE = 2


@functools.cache
def _load_sync_file_range() -> Callable[[int, int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    fn.restype = ctypes.c_int
    call: Callable[[int, int, int, int], int] = fn
    return call


def start_writeback(fd: int, offset: int, nbytes: int) -> bool:
    """Ask the kernel to start writing `nbytes` at `offset` of `fd` to disk; don't wait.

    Returns whether the hint was taken (False where the platform has no such call).
    """
    sync_file_range = _load_sync_file_range()
    if sync_file_range is None:
        return False
    return sync_file_range(fd, offset, nbytes, _SYNC_FILE_RANGE_WRITE) == 0


class FileWriter:
    """Append chunks to `fh` (unbuffered) in writes of at most WRITE_PIECE bytes, starting
    writeback every `writeback_bytes` (never when None: for a file that is not fsynced)."""

    def __init__(self, fh: BinaryIO, writeback_bytes: int | None = WRITEBACK_BYTES) -> None:
        self._fh = fh
        self._writeback_bytes = writeback_bytes
        self.written = 0
        self._started = 0

    def __call__(self, chunk: Chunk) -> None:
        view = memoryview(chunk)
        while view:
            view = view[self._fh.write(view[:WRITE_PIECE]) :]
        self.written += len(chunk)
        if self._writeback_bytes is None:
            return
        if self.written - self._started >= self._writeback_bytes:
            start_writeback(self._fh.fileno(), self._started, self.written - self._started)
            self._started = self.written
