"""The error answers each route documents in OpenAPI, all with the one error shape.

Routes list theirs with ``errors(...)``; every documented error body is ``ErrorBody``
(``{"error", "detail"}``), so FastAPI's default 422 schema (``HTTPValidationError``) never
appears and what the document promises is what the server sends.
"""

from __future__ import annotations

from typing import Any

from registry.api.schemas import ErrorBody

DESCRIPTIONS: dict[int, str] = {
    400: "Bad request: a body that cannot be read (not UTF-8 JSON), a method this path does "
    "not have (`bad_request`).",
    401: "Missing, invalid or revoked bearer token (`unauthorized`).",
    403: "The token's role, or its identity, may not do this (`forbidden`).",
    404: "Not found (`not_found`).",
    409: "Conflicts with the current state (`conflict`, `invalid_state`, "
    "`revision_conflict`, `gate_failed`).",
    413: "The request body is larger than the configured limit (`payload_too_large`).",
    422: "Invalid input (`invalid` with the validation issues, `digest_mismatch`, "
    "`incompatible_adapter`).",
    503: "The database cannot serve this request right now (a lock not granted in time, a "
    "lost connection): `unavailable`; nothing needs fixing, retry after `Retry-After` seconds.",
}

ALWAYS = (400, 503)
"""Every operation may answer these: an unreadable body, a database fault."""

RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before retrying.",
        "schema": {"type": "string"},
        "required": True,
    }
}

READ = (401, 413, 422)
"""Every authenticated route: a token, a bounded body, valid parameters."""


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error statuses and ``ALWAYS``, each with the error
    body (503 also with its ``Retry-After`` header)."""
    answers: dict[int | str, dict[str, Any]] = {}
    for status in sorted(set(statuses) | set(ALWAYS)):
        answers[status] = {"model": ErrorBody, "description": DESCRIPTIONS[status]}
        if status == 503:
            answers[status]["headers"] = RETRY_AFTER
    return answers
