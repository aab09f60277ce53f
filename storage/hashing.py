"""One sequential pass over a safetensors data section, feeding each tensor's sha256.

The data section is read in large chunks into one reusable buffer (memory stays at one
chunk whatever the file size) and each chunk is cut at tensor boundaries with zero-copy
memoryview slices. hashlib releases the GIL on large buffers, so this costs about what one
plain sha256 pass over the file costs.
"""

from __future__ import annotations

import hashlib
from typing import BinaryIO

from storage.digest import CHUNK_SIZE
from storage.errors import InvalidSafetensorsError
from storage.header import Header


def hash_tensors(fh: BinaryIO, header: Header, chunk_size: int = CHUNK_SIZE) -> list[str]:
    """sha256 (hex) of each tensor of `header`, in header order, reading `fh` sequentially.

    `fh` must be positioned at the start of the data section.
    """
    tensors = header.tensors
    hashers = [hashlib.sha256() for _ in tensors]
    buf = memoryview(bytearray(min(chunk_size, max(header.data_size, 1))))
    pos, idx = 0, 0
    while pos < header.data_size:
        n = _read_into(fh, buf[: min(len(buf), header.data_size - pos)])
        if n == 0:
            raise InvalidSafetensorsError(header.path, f"truncated at data byte {pos}")
        off = 0
        while off < n:
            while tensors[idx].end <= pos + off:
                idx += 1
            take = min(tensors[idx].end - pos - off, n - off)
            hashers[idx].update(buf[off : off + take])
            off += take
        pos += n
    return [h.hexdigest() for h in hashers]


def _read_into(fh: BinaryIO, view: memoryview) -> int:
    readinto = getattr(fh, "readinto", None)
    if readinto is not None:
        return int(readinto(view) or 0)
    data = fh.read(len(view))
    view[: len(data)] = data
    return len(data)
