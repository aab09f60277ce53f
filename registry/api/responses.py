"""The error answers each route documents in OpenAPI, all with the one error shape.

Routes list theirs with ``errors(...)``; every documented error body is ``ErrorBody``
(``{"error", "detail"}``), so FastAPI's default 422 schema (``HTTPValidationError``) never
appears and what the document promises is what the server sends.
"""

from __future__ import annotations

from typing import Any

from registry.api.schemas import ErrorBody

DESCRIPTIONS: dict[int, str] = {
    400: "Bad request.",
    401: "Missing, invalid or revoked bearer token (`unauthorized`).",
    403: "The token's role, or its identity, may not do this (`forbidden`).",
    404: "Not found (`not_found`).",
    409: "Conflicts with the current state (`conflict`, `invalid_state`, "
    "`revision_conflict`, `gate_failed`).",
    413: "The request body is larger than the configured limit (`payload_too_large`).",
    422: "Invalid input (`invalid` with the validation issues, `digest_mismatch`, "
    "`incompatible_adapter`).",
}

READ = (401, 413, 422)
"""Every authenticated route: a token, a bounded body, valid parameters."""


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error statuses, each with the error body."""
    return {
        status: {"model": ErrorBody, "description": DESCRIPTIONS[status]}
        for status in sorted(set(statuses))
    }
