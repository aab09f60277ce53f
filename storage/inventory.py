"""What a store holds, for maintenance (`weact gc`, `weact fsck`): blobs and leftovers.

Stores that can list themselves implement `InventoriedStore`: every stored blob with its
size and modification time, and the temporary objects that an interrupted put leaves
behind when its process is killed (a local temp file, an S3 temporary object or an
unfinished S3 multipart upload). A put that fails while its process lives removes its
own leftovers at once; these are for crashes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class StoredBlob:
    digest: str
    size: int
    modified: float  # POSIX timestamp of the blob's last write


@dataclass(frozen=True)
class TempEntry:
    name: str  # opaque to callers: pass it back to `remove_temp`
    size: int
    modified: float  # when it was last written (an upload: when it was started)


@runtime_checkable
class InventoriedStore(Protocol):
    def iter_blobs(self) -> Iterator[StoredBlob]: ...

    def iter_temp(self) -> Iterator[TempEntry]: ...

    def remove_temp(self, name: str) -> None: ...
