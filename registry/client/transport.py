"""The client's HTTP plumbing: every request and every answer it gets become typed errors here.

Two functions hold the whole mapping, so no caller of `RegistryClient` ever sees httpx:

- `raise_for_error(response)`: an error answer -> the `registry.errors` class of its
  `"error"` code (a body without one falls back on the HTTP status: a gateway's 502/503 is
  `RegistryUnavailableError`, its 504 `RegistryTimeoutError`), keeping `status_code` and
  `response`;
- `translate(exc)`: a request that got no (complete) answer -> `RegistryTimeoutError`,
  `TransferError` (a body that broke off) or `RegistryUnavailableError` (refused, DNS,
  reset, protocol), raised `from` the httpx error.

`Transport` owns the one `httpx.Client` and sends everything through them. Every client of
the process verifies TLS with one context, `tls_context()`: httpx builds a new one per client
otherwise, reading the CA bundle each time (about 20 ms of CPU per client). An idempotent
request (GET, HEAD, OPTIONS; PUT and DELETE with a body in memory) answered 503 (the
registry's database is unavailable for a moment) is sent again, up to `retries` more
times, after the answer's `Retry-After` or an exponential backoff (each wait at most
`MAX_RETRY_WAIT_S`). A POST is never repeated: the caller decides.
"""

from __future__ import annotations

import functools
import random
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from registry import errors

_CODE_OF_STATUS: dict[int, str] = {}
for _code, _status in errors.ERROR_CODE_TO_HTTP_STATUS.items():
    _CODE_OF_STATUS.setdefault(_status, _code)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default verification (certifi's CA bundle, or `SSL_CERT_FILE` /
    `SSL_CERT_DIR` as set when first called), built once for the process and shared by its
    clients."""
    return httpx.create_ssl_context()


REGISTRY = "the registry"
STORE = "the blob store"  # a presigned URL the registry redirected to

_GATEWAY_ERRORS: dict[int, type[errors.RegistryError]] = {
    502: errors.RegistryUnavailableError,
    503: errors.RegistryUnavailableError,
    504: errors.RegistryTimeoutError,
}


RETRIES = 4
BACKOFF_S = 0.25
MAX_RETRY_WAIT_S = 5.0
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


def retryable(request: httpx.Request, response: httpx.Response) -> bool:
    """A 503 to an idempotent request whose body (if any) can be sent again."""
    if response.status_code != 503 or request.method not in _IDEMPOTENT:
        return False
    return request.method in ("GET", "HEAD", "OPTIONS") or isinstance(
        request.stream, httpx.ByteStream
    )


def retry_wait(response: httpx.Response, attempt: int) -> float:
    """Seconds to wait before retry number `attempt` (0-based): `Retry-After` when the
    answer has one in seconds, else an exponential backoff with jitter; capped."""
    given = response.headers.get("Retry-After", "").strip()
    if given.isdigit():
        wait = float(given)
    else:
        wait = BACKOFF_S * 2**attempt
    return min(MAX_RETRY_WAIT_S, wait) * random.uniform(1.0, 1.25)


def raise_for_error(response: httpx.Response) -> None:
    """Raise the typed `registry.errors` error that an error response stands for.

    The class is chosen by the body's `"error"` code; a body without one (a proxy's error
    page, say) falls back to the HTTP status.
    """
    status = response.status_code
    if status < 400:
        return
    code, detail = _parse_error_body(response)
    if code is None:
        cls = _GATEWAY_ERRORS.get(status)
        if cls is not None:
            raise cls(detail, status_code=status, response=response)
        code = _CODE_OF_STATUS.get(status, "http_error")
    raise errors.error_for(code, detail, status_code=status, response=response)


def _parse_error_body(response: httpx.Response) -> tuple[str | None, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return body["error"], body.get("detail")
    text = response.text.strip()[:500] or response.reason_phrase
    return None, f"HTTP {response.status_code}{_at(_request_of(response))}: {text}"


def translate(
    exc: httpx.RequestError, *, received: int | None = None, what: str = REGISTRY
) -> errors.RegistryError:
    """The typed error for a request to `what` that got no answer, or (`received` bytes of
    the body) half of one."""
    at = _at(_request_of(exc))
    reason = str(exc) or type(exc).__name__
    after = f" after {received} bytes" if received is not None else ""
    if isinstance(exc, httpx.TimeoutException):
        return errors.RegistryTimeoutError(
            f"{what} did not answer in time{after}{at}: {type(exc).__name__}"
        )
    if received is not None:
        return errors.TransferError(f"the transfer from {what} broke off{after}{at}: {reason}")
    return errors.RegistryUnavailableError(f"cannot reach {what}{at}: {reason}")


def read_json(response: httpx.Response) -> Any:
    """The answer's JSON body; another server at the registry's URL is a typed error too."""
    try:
        return response.json()
    except ValueError as exc:
        text = " ".join(response.text.split())[:200]
        raise errors.UnexpectedResponseError(
            f"HTTP {response.status_code}{_at(_request_of(response))} with a body that is not "
            f"the registry's JSON (is this the registry's URL?): {text!r}",
            status_code=response.status_code,
            response=response,
        ) from exc


def check_url(url: str) -> str:
    """`url` without a trailing slash, if it is http(s)://HOST[:PORT][/PATH]."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise errors.InvalidError(f"registry URL {url!r}: {exc}") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise errors.InvalidError(f"registry URL {url!r}: expected http(s)://HOST[:PORT]")
    return url.rstrip("/")


def _request_of(source: httpx.RequestError | httpx.Response) -> httpx.Request | None:
    try:
        return source.request
    except RuntimeError:  # an error or a response made outside a request carries none
        return None


def _at(request: httpx.Request | None) -> str:
    """` (METHOD URL)` of a request, without its query (a presigned URL's signature)."""
    if request is None:
        return ""
    return f" ({request.method} {request.url.copy_with(query=None)})"


class Transport:
    """The one `httpx.Client` of a `RegistryClient`, its base URL `URL/v1` and bearer token."""

    def __init__(
        self,
        url: str,
        token: str | None,
        timeout: float,
        transport: httpx.BaseTransport | None = None,
        retries: int = RETRIES,
    ) -> None:
        self.url = check_url(url)
        self.timeout = timeout
        self.token = token
        self.retries = retries
        self._transport = transport
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=f"{self.url}/v1",
            headers=headers,
            timeout=timeout,
            transport=transport,
            follow_redirects=False,
            verify=tls_context(),
        )

    def close(self) -> None:
        self._http.close()

    def request(
        self, method: str, path: str, *, answers: tuple[int, ...] = (), **kwargs: Any
    ) -> httpx.Response:
        """Send a request; raise the typed error of an error answer not listed in `answers`."""
        response = self._send(self._http.build_request(method, path, **kwargs))
        if response.status_code not in answers:
            raise_for_error(response)
        return response

    def _send(self, request: httpx.Request, *, stream: bool = False) -> httpx.Response:
        """Send `request`; again after a wait while it is answered 503 and may be repeated."""
        for attempt in range(self.retries + 1):
            response = _send(self._http, request, stream=stream)
            if attempt == self.retries or not retryable(request, response):
                return response
            wait = retry_wait(response, attempt)
            response.close()
            time.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        return read_json(self.request(method, path, **kwargs))

    @contextmanager
    def stream(self, path: str) -> Iterator[Body]:
        """GET `path` as a stream; a 307 (to a presigned URL) is followed without our token."""
        response = self._send(self._http.build_request("GET", path), stream=True)
        plain: httpx.Client | None = None
        what = REGISTRY
        try:
            if response.status_code == 307:
                location = response.headers["Location"]
                response.close()
                # A presigned URL carries its own credentials: never send our bearer token there.
                plain = httpx.Client(
                    timeout=self.timeout,
                    follow_redirects=False,
                    transport=self._transport,
                    verify=tls_context(),
                )
                request, what = plain.build_request("GET", location), STORE
                response = _send(plain, request, stream=True, what=what)
            if response.status_code >= 400:
                Body(response, what).read()
                raise_for_error(response)
            yield Body(response, what)
        finally:
            response.close()
            if plain is not None:
                plain.close()


class Body:
    """A streamed answer's body; a transfer that breaks off is a typed error."""

    def __init__(self, response: httpx.Response, what: str = REGISTRY) -> None:
        self.response = response
        self.what = what

    @property
    def size(self) -> int:
        """The announced length (0 when unknown)."""
        return int(self.response.headers.get("Content-Length", 0))

    def chunks(self, chunk_size: int) -> Iterator[bytes]:
        iterator = self.response.iter_bytes(chunk_size)
        while True:
            try:
                chunk = next(iterator, None)
            except httpx.RequestError as exc:
                raise translate(
                    exc, received=self.response.num_bytes_downloaded, what=self.what
                ) from exc
            if chunk is None:
                return
            yield chunk

    def read(self) -> bytes:
        """The whole body, kept on the response (`response.json()` then works)."""
        try:
            return self.response.read()
        except httpx.RequestError as exc:
            raise translate(
                exc, received=self.response.num_bytes_downloaded, what=self.what
            ) from exc


def _send(
    client: httpx.Client, request: httpx.Request, *, stream: bool = False, what: str = REGISTRY
) -> httpx.Response:
    try:
        return client.send(request, stream=stream)
    except httpx.RequestError as exc:
        raise translate(exc, what=what) from exc
