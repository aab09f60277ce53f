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
    ├── ReplayError (ValueError)                  replay                client side: a trained
    │                                                                   directory whose push
    │                                                                   would replay data
    ├── UnexpectedResponseError                   bad_response          client side: an answer
    │                                                                   that is not the API's
    └── RegistryUnavailableError (ConnectionError) unavailable         503 with Retry-After:
        │                                                               the database is
        │                                                               unavailable (a lock not
        │                                                               granted in time, a lost
        │                                                               connection); client
        │                                                               side also: no answer
        │                                                               (refused, DNS, reset,
        │                                                               a proxy's 502/503)
        ├── RegistryTimeoutError (TimeoutError)   timeout               none in time (or a 504)
        └── TransferError                         transfer_failed       a body that broke off

``error_for(code, detail)`` turns a code back into its class (used by ``registry.client``).
The client-side errors have no HTTP status of their own: ``registry.client`` raises them
``from`` the transport error (httpx) that caused them. Every error the client raises keeps
the ``status_code`` and ``response`` it came with, when there was one (else ``None``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import httpx


class RegistryError(Exception):
    """Base of every registry error; ``detail`` is a message or a JSON-able object.

    ``status_code`` and ``response`` are those of the HTTP answer the client turned into
    this error (``None`` on the server, and for a request that got no answer).
    """

    code: ClassVar[str] = "registry_error"

    def __init__(
        self,
        detail: Any = None,
        *,
        status_code: int | None = None,
        response: httpx.Response | None = None,
    ) -> None:
        self.detail = detail if detail is not None else self.code
        self.status_code = status_code
        self.response = response
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


class UntrustedError(RegistryError, PermissionError):
    """Not signed as the offline root of trust requires (registry.trust): a missing or
    invalid publisher or approver signature, a root not signed by its admin threshold."""

    code = "untrusted"


class StaleMetadataError(UntrustedError):
    """The registry's signed timestamp has expired: it stopped vouching that the revision
    it serves is current (a frozen registry). The node marks itself stale; same code."""


class PayloadTooLargeError(RegistryError, ValueError):
    code = "payload_too_large"


class ReplayError(RegistryError, ValueError):
    """Publishing a trained directory would replay data (`registry.client.replay`): its
    samples supervise another capability, or an ancestor already used a data file. Raised
    by the client before anything is uploaded, unless replay is allowed."""

    code = "replay"


class UnexpectedResponseError(RegistryError):
    """An answer the client cannot read as the API's (not JSON: another server at that URL)."""

    code = "bad_response"


class RegistryUnavailableError(RegistryError, ConnectionError):
    """The registry did not answer: connection refused, name not resolved, connection reset,
    a protocol error, or a gateway's 502/503 in front of it (client side); or the server's
    database could not be used for this request, which was rolled back (503: retry)."""

    code = "unavailable"


class RegistryTimeoutError(RegistryUnavailableError, TimeoutError):
    """No answer within the client's timeout (connect, read, write or pool), or a 504."""

    code = "timeout"


class TransferError(RegistryUnavailableError):
    """A body (a blob download) that broke off before its bytes could be verified.

    Raised by the client only. The server verifies a blob before sending its first byte
    (a corrupted one is answered ``digest_mismatch``); a stream still breaks off when the
    connection fails, or when a large blob changes on the server between that check and
    the sending, which reaches the client as a dropped connection, never as a response.
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
    RegistryUnavailableError,
    UntrustedError,
)
"""The errors a registry server answers with (every code of the HTTP table)."""

CLIENT_ERRORS: tuple[type[RegistryError], ...] = (
    UnexpectedResponseError,
    RegistryTimeoutError,
    TransferError,
)
"""The errors only the client raises: there was no (usable) answer."""

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
    "unavailable": 503,
    "untrusted": 403,
}

RETRY_AFTER_S: dict[str, int] = {"unavailable": 1}
"""Codes whose answer carries ``Retry-After`` (seconds): a retry may well succeed."""


def http_status_for(code: str) -> int:
    """The HTTP status of an error code (500 for a code outside the table)."""
    return ERROR_CODE_TO_HTTP_STATUS.get(code, 500)


def error_for(
    code: str,
    detail: Any,
    *,
    status_code: int | None = None,
    response: httpx.Response | None = None,
) -> RegistryError:
    """Rebuild the typed error for a code received over HTTP."""
    cls = ERROR_CLASSES.get(code, RegistryError)
    return cls(detail, status_code=status_code, response=response)
