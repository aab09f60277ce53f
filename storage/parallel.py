"""Per-tensor sha256 of safetensors files on disk, on several threads at once.

A tensor digest is one sha256 over the tensor's bytes: sequential by nature. What can run
in parallel is (1) different tensors, and (2) reading a tensor's next chunk while its
current one is hashed (hashlib and file reads release the GIL). So the data sections are
cut into *items*, one large tensor or a run of adjacent small ones of at most `chunk_size`
bytes, and each item into *units* of at most `chunk_size` bytes. A worker keeps the item it
started and otherwise takes the largest item not yet started (longest first, so a huge
tensor starts at once and the small ones fill the other cores). When every item has been
started, an idle worker helps the item with the most bytes left: it reads the next unit
ahead, then hashes it when the previous unit is done. Units of one item are hashed in
order, so every digest is the sequential one, bit for bit. Hence a lower bound on the time:
the largest tensor's hash time, which no split can shorten.

Memory: each worker reads with `pread` into its own buffer of at most `chunk_size` bytes, so
at most `workers * chunk_size` bytes of tensor data are in memory whatever the file sizes.
No mmap: a file truncated under us is a short read and an error, not a SIGBUS.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from storage.errors import InvalidSafetensorsError
from storage.header import Header

MAX_DEFAULT_WORKERS = 8
"""The default thread count stops here: 8 sha256 streams already need ~16 GB/s of memory
bandwidth, and each thread holds a `chunk_size` buffer. Pass `workers=` for more."""


def default_workers() -> int:
    """The cores this process may run on, at most MAX_DEFAULT_WORKERS."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return min(cores, MAX_DEFAULT_WORKERS)


@dataclass
class _Item:
    """Adjacent tensors of one file, hashed unit by unit; offsets are absolute in the file."""

    fd: int
    label: str
    data_start: int
    begin: int
    end: int
    pieces: list[tuple[int, int, hashlib._Hash]] = field(default_factory=list)
    claimed: int = 0  # units [begin, claimed) have been handed out
    hashed: int = 0  # units [begin, hashed) have been hashed

    def __post_init__(self) -> None:
        self.claimed = self.hashed = self.begin

    def hash_unit(self, view: memoryview, start: int) -> None:
        stop = start + len(view)
        for begin, end, hasher in self.pieces:
            if begin < stop and end > start:
                hasher.update(view[max(begin, start) - start : min(end, stop) - start])


class _Aborted(Exception):
    """Another worker failed; stop quietly (its error is the one raised)."""


class _Schedule:
    """Hands units to workers and orders the hashing of each item's units."""

    def __init__(self, items: list[_Item], chunk_size: int) -> None:
        self._unstarted = sorted(items, key=lambda i: i.end - i.begin)  # largest last
        self._started: list[_Item] = []
        self._chunk_size = chunk_size
        self._cond = threading.Condition()
        self.error: BaseException | None = None

    def claim(self, current: _Item | None) -> tuple[_Item, int, int] | None:
        """The next unit for a worker that last worked on `current`; None when all are out."""
        with self._cond:
            if self.error is not None:
                return None
            item = current if current is not None and current.claimed < current.end else None
            if item is None and self._unstarted:
                item = self._unstarted.pop()
                self._started.append(item)
            if item is None:
                item = max(self._started, key=lambda i: i.end - i.claimed, default=None)
            if item is None or item.claimed == item.end:
                return None
            start = item.claimed
            item.claimed = min(item.end, start + self._chunk_size)
            return item, start, item.claimed

    def wait_turn(self, item: _Item, start: int) -> None:
        with self._cond:
            self._cond.wait_for(lambda: item.hashed == start or self.error is not None)
            if self.error is not None:
                raise _Aborted

    def done(self, item: _Item, end: int) -> None:
        with self._cond:
            item.hashed = end
            self._cond.notify_all()

    def fail(self, exc: BaseException) -> None:
        with self._cond:
            if self.error is None:
                self.error = exc
            self._cond.notify_all()


def hash_files(
    files: Sequence[tuple[int, Header]], *, chunk_size: int, workers: int | None = None
) -> list[list[str]]:
    """sha256 (hex) of every tensor of each `(fd, header)`, in header order per file.

    `fd` is an open file descriptor of the file `header` was read from (read with pread,
    so its position does not matter). `workers` threads (default: the usable cores; the
    calling thread is one of them) hash at once.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    hashers = [[hashlib.sha256() for _ in header.tensors] for _, header in files]
    items = [
        item
        for (fd, header), file_hashers in zip(files, hashers, strict=True)
        for item in _items(fd, header, file_hashers, chunk_size)
    ]
    units = sum(-(-(i.end - i.begin) // chunk_size) for i in items)
    count = max(1, min(workers or default_workers(), units))
    buffer_size = min(chunk_size, max((i.end - i.begin for i in items), default=1))
    _run(_Schedule(items, chunk_size), count, buffer_size)
    return [[h.hexdigest() for h in file_hashers] for file_hashers in hashers]


def _items(fd: int, header: Header, hashers: list[hashlib._Hash], chunk_size: int) -> list[_Item]:
    """Cut a file's tensors into items: a tensor of `chunk_size` or more bytes alone, runs of
    adjacent smaller ones together up to `chunk_size` bytes. Empty items are left out."""
    items: list[_Item] = []
    run: _Item | None = None
    for tensor, hasher in zip(header.tensors, hashers, strict=True):
        begin, end = header.data_start + tensor.begin, header.data_start + tensor.end
        if run is None or end - run.begin > chunk_size:
            run = _Item(fd, header.path, header.data_start, begin, end)
            items.append(run)
        run.end = end
        run.pieces.append((begin, end, hasher))
    return [item for item in items if item.end > item.begin]


def _run(schedule: _Schedule, workers: int, buffer_size: int) -> None:
    threads = [
        threading.Thread(target=_work, args=(schedule, buffer_size), name=f"manifest-{n}")
        for n in range(1, workers)
    ]
    for thread in threads:
        thread.start()
    _work(schedule, buffer_size)  # the calling thread is worker 0
    for thread in threads:
        thread.join()
    if schedule.error is not None:
        raise schedule.error


def _work(schedule: _Schedule, buffer_size: int) -> None:
    view = memoryview(bytearray(buffer_size))
    current: _Item | None = None
    try:
        while (unit := schedule.claim(current)) is not None:
            current, start, end = unit
            _pread_exact(current, view[: end - start], start)
            schedule.wait_turn(current, start)
            current.hash_unit(view[: end - start], start)
            schedule.done(current, end)
    except _Aborted:
        pass
    except BaseException as exc:  # raised by the calling thread once all have stopped
        schedule.fail(exc)


def _pread_exact(item: _Item, view: memoryview, offset: int) -> None:
    done = 0
    while done < len(view):
        n = _pread_into(item.fd, view[done:], offset + done)
        if n == 0:
            where = offset + done - item.data_start
            raise InvalidSafetensorsError(item.label, f"truncated at data byte {where}")
        done += n


def _pread_into(fd: int, view: memoryview, offset: int) -> int:
    if hasattr(os, "preadv"):
        return os.preadv(fd, [view], offset)
    data = os.pread(fd, len(view), offset)  # platforms without preadv: one more copy
    view[: len(data)] = data
    return len(data)
