"""Request and response bodies of the node's HTTP API."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class EpisodeCreate(BaseModel):
    task: str = Field(min_length=1, max_length=20_000)
    policy: Literal["hard", "soft"] | None = None
    order: list[str] | None = Field(default=None, min_length=1, max_length=32)
    max_steps: int | None = Field(default=None, gt=0, le=1024)
    # soft policy: what to prefetch while a tool runs, by active config ("backbone" = none)
    guesses: dict[str, str] | None = Field(default=None, max_length=64)
    # soft policy: with no adapter active, decode only the valid moves under a mask (the
    # constrained choice, `--policy soft --choose`); None: the node's setting
    constrained: bool | None = None


class EpisodePublic(BaseModel):
    id: str
    status: str
    policy: dict[str, Any]
