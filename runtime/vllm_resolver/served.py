"""The names the API server answers for, shared by the resolver and the follower."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from runtime.vllm_resolver.policy import ServedName


class ServedTable:
    """name -> binding of what is served, and every version pulled into the library."""

    def __init__(self) -> None:
        self._names: dict[str, ServedName] = {}
        self._pulled: dict[int, str] = {}  # adapter id -> version name, while its files exist
        self._lock = threading.Lock()

    def add(self, binding: ServedName) -> None:
        with self._lock:
            self._names[binding.name] = binding
            self._pulled[binding.adapter_id] = binding.version

    def remove(self, bindings: Iterable[ServedName]) -> None:
        """Forget the names, each only while still bound as given (not re-resolved since)."""
        with self._lock:
            for b in bindings:
                if self._names.get(b.name) == b:
                    del self._names[b.name]

    def forget_files(self, adapter_ids: Iterable[int]) -> None:
        with self._lock:
            for i in adapter_ids:
                self._pulled.pop(i, None)

    def snapshot(self) -> dict[str, ServedName]:
        with self._lock:
            return dict(self._names)

    def pulled(self) -> dict[int, str]:
        with self._lock:
            return dict(self._pulled)

    def channels(self) -> dict[str, int]:
        """Channel -> the newest revision a served channel name of it was resolved at."""
        out: dict[str, int] = {}
        for b in self.snapshot().values():
            if b.channel is not None:
                out[b.channel] = max(out.get(b.channel, 0), b.revision or 0)
        return out
