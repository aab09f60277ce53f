"""Path parameters with the patterns the services enforce, so the OpenAPI document says
which values a path accepts (a value outside them is 422 ``invalid``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

from registry.names import NAME_RE, NODE_ID_MAX, NODE_ID_PATTERN

Sha256 = Annotated[str, Path(pattern="^[0-9a-f]{64}$", description="A sha256 digest (hex).")]
ChannelName = Annotated[str, Path(pattern=NAME_RE.pattern, description="A channel name.")]
CapabilityName = Annotated[str, Path(pattern=NAME_RE.pattern, description="A capability.")]
NodeId = Annotated[
    str,
    Path(
        max_length=NODE_ID_MAX,
        pattern=NODE_ID_PATTERN,
        description="A runtime node's id.",
    ),
]
