"""A pipeline stage: one helper thread applying a function to byte chunks, in order.

The calling thread keeps reading its source while the stage hashes, writes or uploads what
it was given before; hashlib and file or socket I/O release the GIL, so on two cores the
stages really overlap. Memory stays bounded: `submit` blocks while `depth` chunks are
queued, so one stage holds at most `depth + 1` chunks (queued plus the one in hand).

Errors: a chunk that fails in the helper thread is re-raised in the caller by the next
`submit` or by `finish`; the helper keeps draining (and dropping) what is queued, so a
caller never blocks on a dead stage. `close` abandons what is queued and joins the thread,
so after it returns nothing of the stage touches a file, a socket or a buffer any more.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

Chunk = bytes | bytearray | memoryview
_DONE = object()


class Stage:
    """Apply `fn` to each submitted chunk, in submission order, on a helper thread.

    Chunks smaller than `inline_below` that arrive before the thread was needed are applied
    in the caller's thread (a thread costs more than hashing a few KiB); once the thread has
    started every chunk goes through it, which keeps the order. The caller must not modify
    a submitted chunk until `finish` or `close` has returned; pass `bytes` to be safe.
    """

    def __init__(
        self, fn: Callable[[Chunk], object], *, depth: int = 2, inline_below: int = 0, name: str
    ) -> None:
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self.depth = depth
        self._fn = fn
        self._inline_below = inline_below
        self._name = name
        self._queue: queue.Queue[object] = queue.Queue(maxsize=depth)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._abandon = False

    def submit(self, chunk: Chunk) -> None:
        """Queue `chunk` (blocking while `depth` are queued); raise an earlier failure."""
        self._raise_failure()
        if self._thread is None:
            if len(chunk) < self._inline_below:
                self._fn(chunk)
                return
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        self._queue.put(chunk)

    def finish(self) -> None:
        """Wait until every chunk has been applied; raise the first failure, if any."""
        self._join()
        self._raise_failure()

    def close(self) -> None:
        """Stop at once: drop the queued chunks and join the thread (safe to call twice)."""
        self._abandon = True
        self._join()

    def __enter__(self) -> Stage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _join(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(_DONE)
            thread.join()

    def _raise_failure(self) -> None:
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        while (chunk := self._queue.get()) is not _DONE:
            if self._error is not None or self._abandon:
                continue  # keep draining so that `submit` never blocks on a dead stage
            try:
                self._fn(chunk)  # type: ignore[arg-type]
            except BaseException as exc:  # re-raised in the caller's thread
                self._error = exc
