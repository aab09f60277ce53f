"""The plumbing every endpoint method shares: one `Transport`, the revisions seen, JSON
GET/POST. `ChannelEndpoints` and `Endpoints` build on it; see `endpoints`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

import httpx

from registry.client.seen import SeenRevisions
from registry.client.transport import RETRIES, Transport


class EndpointBase:
    """One method per JSON endpoint of the registry API; see docs/CONTRACTS.md section 2.

    `url` is the registry's base URL (`http(s)://HOST[:PORT]`; `InvalidError` otherwise),
    `token` a bearer token, `timeout` seconds for each request (a long-poll adds its wait),
    `retries` how often an idempotent request answered 503 is sent again (see `transport`).
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout: float = 30.0,
        *,
        transport: httpx.BaseTransport | None = None,
        retries: int = RETRIES,
    ) -> None:
        self._transport = Transport(url, token, timeout, transport, retries)
        self.url = self._transport.url
        self.timeout = timeout
        self.seen = SeenRevisions()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._transport.close()

    def _get(self, path: str, **params: Any) -> Any:
        clean = {key: value for key, value in params.items() if value is not None}
        return self._transport.json("GET", path, params=clean)

    def _post(self, path: str, body: Mapping[str, Any]) -> Any:
        return self._transport.json("POST", path, json=dict(body))
