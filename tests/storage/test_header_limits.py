"""`HeaderLimits`: each bound refuses its header bomb as `HeaderLimitError` naming the limit,
before the header is read (bytes) or while it is parsed (tensors, dims, elements)."""

from __future__ import annotations

import io
import json
import struct
import time

import pytest

from storage import HeaderLimitError, HeaderLimits, InvalidSafetensorsError, manifest_of_stream

ZERO = {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
LIMITS = HeaderLimits(max_header_bytes=4096, max_tensors=8, max_dims=4, max_elements=1000)


def _file(header: dict[str, object], data: bytes = b"", pad: int = 0) -> bytes:
    raw = json.dumps(header).encode() + b" " * pad
    return struct.pack("<Q", len(raw)) + raw + data


def _refused(data: bytes, limits: HeaderLimits = LIMITS) -> HeaderLimitError:
    with pytest.raises(HeaderLimitError) as caught:
        manifest_of_stream(io.BytesIO(data), len(data), label="bomb", limits=limits)
    return caught.value


@pytest.mark.parametrize(
    ("limit", "data"),
    [
        ("max_header_bytes", _file({"x": ZERO}, pad=5000)),
        ("max_tensors", _file({f"t{i}": ZERO for i in range(9)})),
        (
            "max_dims",
            _file({"x": {"dtype": "F32", "shape": [1] * 5, "data_offsets": [0, 4]}}, b"\0" * 4),
        ),  # fmt: skip
        (
            "max_elements",
            _file({"x": {"dtype": "U8", "shape": [1001], "data_offsets": [0, 1001]}}, b"\0" * 1001),
        ),  # fmt: skip
    ],
)
def test_each_limit_refuses_its_bomb_naming_the_limit(limit: str, data: bytes) -> None:
    error = _refused(data)
    assert error.limit == limit
    assert error.bound == getattr(LIMITS, limit)
    assert f"limit {limit} = {error.bound}" in str(error)
    assert isinstance(error, InvalidSafetensorsError)


def test_at_the_limits_a_header_is_accepted() -> None:
    header = {f"t{i}": ZERO for i in range(7)}
    header["big"] = {"dtype": "U8", "shape": [10, 10, 10, 1], "data_offsets": [0, 1000]}
    manifest = manifest_of_stream(io.BytesIO(data := _file(header, b"\0" * 1000)), len(data),
                                  limits=LIMITS)  # fmt: skip
    assert len(manifest) == 8


def test_the_byte_limit_is_checked_before_the_header_is_read() -> None:
    """A length prefix of 94 MiB over a 1 MiB limit: refused without reading the rest."""
    prefix = struct.pack("<Q", 94 * 1024**2)
    stream = io.BytesIO(prefix)  # the 94 MiB are not even there
    started = time.monotonic()
    with pytest.raises(HeaderLimitError, match="max_header_bytes"):
        manifest_of_stream(stream, 8 + 94 * 1024**2, limits=HeaderLimits(1024**2))
    assert time.monotonic() - started < 0.1


def test_the_tensor_count_stops_the_parse_early() -> None:
    """200 k tensors over a limit of 8: refused long before the header is all parsed."""
    entries = b",".join(b'"t%d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}' % i
                        for i in range(200_000))  # fmt: skip
    raw = b"{" + entries + b"}"
    data = struct.pack("<Q", len(raw)) + raw
    started = time.monotonic()
    error = _refused(data, HeaderLimits(max_header_bytes=len(raw), max_tensors=8))
    assert error.limit == "max_tensors"
    assert time.monotonic() - started < 1.0
