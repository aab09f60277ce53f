"""The bases of the API's schemas: `In` (request bodies: unknown fields and NUL characters
refused), `Out` (responses, read from domain objects) and `Documented` (shapes the client
reads without a record type)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


class In(BaseModel):
    """Request bodies: unknown fields and NUL characters are refused."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: Any) -> Any:
        if _has_nul(data):
            raise ValueError("strings must not contain NUL characters")
        return data


class Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class Documented(BaseModel):
    """Shapes the OpenAPI document promises that the client reads without a record type:
    error bodies (turned into typed errors) and blob receipts."""
