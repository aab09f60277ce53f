"""Hostile safetensors files ("header bombs"), built as bytes without numpy or torch.

Each is a well-formed file of its kind: an 8-byte length, that many bytes of JSON header,
then the data the header describes; what makes it hostile is only the header's size or
shape. Also: the resident set of a process (from /proc), to see what a bomb cost a server.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

MIB = 1024 * 1024
ZERO_SIZE = b'{"dtype":"F32","shape":[0],"data_offsets":[0,0]}'


def _file(header: bytes, data: bytes = b"") -> bytes:
    return struct.pack("<Q", len(header)) + header + data


def zero_size_tensors(count: int) -> bytes:
    """``count`` tensors of zero elements: a header of ~57 bytes per tensor, no data."""
    entries = b",".join(b'"t%d":%s' % (i, ZERO_SIZE) for i in range(count))
    return _file(b"{" + entries + b"}")


def many_dims(dims: int) -> bytes:
    """One F32 tensor of one element whose shape has ``dims`` dimensions of 1."""
    shape = b"1," * (dims - 1) + b"1"  # not a join over a list: 6 s for 33 M items
    header = b'{"x":{"dtype":"F32","shape":[' + shape + b'],"data_offsets":[0,4]}}'
    return _file(header, b"\0\0\0\0")


def padded_header(size: int) -> bytes:
    """One F32 scalar and a header padded with spaces to ``size`` bytes."""
    body = json.dumps({"x": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}}).encode()
    return _file(body + b" " * (size - len(body)), b"\0\0\0\0")


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    """A field of /proc/PID/status in KiB (VmRSS now, VmHWM the peak so far)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise LookupError(f"{field} not in /proc/{pid}/status")


def reset_peak(pid: int) -> None:
    """Start VmHWM over from the current resident set (Linux: clear_refs 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
