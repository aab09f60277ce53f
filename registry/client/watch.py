"""`ChannelWatch`: long-polls of a channel that the caller can cancel at once.

A runtime node spends most of its life inside one long-poll. With the blocking client a
stop could only abandon that request; here the long-poll is an asyncio request, so
cancelling the task that awaits it closes the connection there and then (the registry sees
the client go). Errors are the same typed `registry.errors` as `RegistryClient`'s.

    async with client.channel_watch() as watch:
        revision = await watch.wait("prod", after=7, wait=30)  # None: nothing newer in 30 s
"""

from __future__ import annotations

from types import TracebackType
from typing import Self, cast

import httpx

from registry.client.records import Revision
from registry.client.transport import (
    check_url,
    raise_for_error,
    read_json,
    tls_context,
    translate,
)


class ChannelWatch:
    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout: float = 30.0,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = check_url(url)
        self.timeout = timeout
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.AsyncClient(
            base_url=f"{self.url}/v1",
            headers=headers,
            timeout=timeout,
            transport=transport,
            follow_redirects=False,
            verify=tls_context(),
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def wait(self, name: str, *, after: int, wait: float = 30.0) -> Revision | None:
        """The channel's revision once it passes `after`, or None after `wait` seconds.

        A connection dropped before any answer (a kept-alive connection the server closed
        as it was reused) is retried once on a new one: the long-poll is idempotent.
        """
        for retry in (True, False):
            try:
                response = await self._http.get(
                    f"/channels/{name}",
                    params={"after": after, "wait": wait},
                    timeout=wait + self.timeout,
                )
                break
            except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
                if not retry:
                    raise translate(exc) from exc
            except httpx.RequestError as exc:
                raise translate(exc) from exc
        if response.status_code == 304:
            return None
        raise_for_error(response)
        return cast(Revision, read_json(response))
