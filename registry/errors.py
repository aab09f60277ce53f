"""Typed registry errors, each with a stable ``code`` and one table mapping codes to HTTP.

    RegistryError
    ├── InvalidError (ValueError)                 invalid               422
    │   ├── DigestMismatchError                   digest_mismatch       422
    │   └── IncompatibleAdapterError              incompatible_adapter  422
    ├── BadRequestError (ValueError)              bad_request           400
    ├── UnauthorizedError (PermissionError)       unauthorized          401
    ├── ForbiddenError (PermissionError)          forbidden             403
    ├── NotFoundError (LookupError)               not_found             404
    ├── ConflictError                             conflict              409
    │   ├── InvalidStateError                     invalid_state         409
    │   ├── RevisionConflictError                 revision_conflict     409
    │   └── GateFailedError                       gate_failed           409 (detail = report)
    ├── PayloadTooLargeError (ValueError)         payload_too_large     413
    └── TransferError (ConnectionError)           transfer_failed       (client side: a
                                                  download that broke off mid-stream)

``error_for(code, detail)`` turns a code back into its class (used by ``registry.client``).
"""

from __future__ import annotations

from typing import Any, ClassVar


class RegistryError(Exception):
    """Base of every registry error; ``detail`` is a message or a JSON-able object."""

    code: ClassVar[str] = "registry_error"

    def __init__(self, detail: Any = None) -> None:
        self.detail = detail if detail is not None else self.code
        super().__init__(detail if isinstance(detail, str) else f"{self.code}: {detail!r}")


class InvalidError(RegistryError, ValueError):
    code = "invalid"


class DigestMismatchError(InvalidError):
    code = "digest_mismatch"


class IncompatibleAdapterError(InvalidError):
    code = "incompatible_adapter"


class BadRequestError(RegistryError, ValueError):
    code = "bad_request"


class UnauthorizedError(RegistryError, PermissionError):
    code = "unauthorized"


class ForbiddenError(RegistryError, PermissionError):
    code = "forbidden"


class NotFoundError(RegistryError, LookupError):
    code = "not_found"


class ConflictError(RegistryError):
    code = "conflict"


class InvalidStateError(ConflictError):
    code = "invalid_state"


class RevisionConflictError(ConflictError):
    code = "revision_conflict"


class GateFailedError(ConflictError):
    """A promotion refused by the gate; ``detail`` is the gate report as a dict."""

    code = "gate_failed"


class PayloadTooLargeError(RegistryError, ValueError):
    code = "payload_too_large"


class TransferError(RegistryError, ConnectionError):
    """A blob download that broke off before its bytes could be verified.

    Raised by the client only: the server aborts a stream whose stored bytes fail its own
    check, which reaches the client as a dropped connection, never as a response.
    """

    code = "transfer_failed"


_ERRORS: tuple[type[RegistryError], ...] = (
    InvalidError,
    DigestMismatchError,
    IncompatibleAdapterError,
    BadRequestError,
    UnauthorizedError,
    ForbiddenError,
    NotFoundError,
    ConflictError,
    InvalidStateError,
    RevisionConflictError,
    GateFailedError,
    PayloadTooLargeError,
    TransferError,
)

ERROR_CLASSES: dict[str, type[RegistryError]] = {cls.code: cls for cls in _ERRORS}

ERROR_CODE_TO_HTTP_STATUS: dict[str, int] = {
    "invalid": 422,
    "bad_request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "conflict": 409,
    "invalid_state": 409,
    "revision_conflict": 409,
    "gate_failed": 409,
    "digest_mismatch": 422,
    "payload_too_large": 413,
    "incompatible_adapter": 422,
}


def http_status_for(code: str) -> int:
    """The HTTP status of an error code (500 for a code outside the table)."""
    return ERROR_CODE_TO_HTTP_STATUS.get(code, 500)


def error_for(code: str, detail: Any) -> RegistryError:
    """Rebuild the typed error for a code received over HTTP."""
    cls = ERROR_CLASSES.get(code, RegistryError)
    return cls(detail)
