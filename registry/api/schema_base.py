"""The bases of the API's schemas: `In` (request bodies: unknown fields and NUL characters
refused; defined with the string types in schema_types), `Out` (responses, read from domain
objects) and `Documented` (shapes the client reads without a record type)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from registry.api.schema_types import In as In  # re-exported


class Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class Documented(BaseModel):
    """Shapes the OpenAPI document promises that the client reads without a record type:
    error bodies (turned into typed errors) and blob receipts."""
