"""What one client has seen of each channel, so that it never reads an older revision.

A registry serves channel reads from memory (`registry.services.read_cache`); behind a load
balancer, another process may not have heard of a promotion this client just made or read.
`SeenRevisions` keeps the highest revision seen per channel (from reads, long-polls,
promotions, rollbacks and the `X-Weact-Channel-Revisions` header of a revoke) and sends it
as `X-Weact-Min-Revision`, with the ETag of the last revision read as `If-None-Match`: an
unchanged channel answers 304 and the remembered revision is returned.
"""

from __future__ import annotations

import copy
import threading

import httpx

from registry.client.records import Revision
from registry.client.transport import read_json

MIN_REVISION = "X-Weact-Min-Revision"
MOVED = "X-Weact-Channel-Revisions"


class SeenRevisions:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._highest: dict[str, int] = {}
        self._last: dict[str, tuple[str, Revision]] = {}  # channel -> (ETag, revision)

    def highest(self, channel: str) -> int:
        return self._highest.get(channel, 0)

    def saw(self, channel: str, revision: int) -> None:
        with self._lock:
            self._highest[channel] = max(revision, self._highest.get(channel, 0))

    def saw_revision(self, revision: Revision, etag: str | None = None) -> Revision:
        self.saw(revision["channel"], revision["revision"])
        if etag is not None:
            with self._lock:
                self._last[revision["channel"]] = (etag, copy.deepcopy(revision))
        return revision

    def saw_header(self, response: httpx.Response) -> None:
        """Record `channel=revision` pairs of the `X-Weact-Channel-Revisions` header."""
        for pair in response.headers.get(MOVED, "").split(","):
            channel, _, number = pair.strip().rpartition("=")
            if channel and number.isdigit():
                self.saw(channel, int(number))

    def request_headers(self, channel: str) -> dict[str, str]:
        headers = {}
        if channel in self._highest:
            headers[MIN_REVISION] = str(self._highest[channel])
        last = self._last.get(channel)
        if last is not None:
            headers["If-None-Match"] = last[0]
        return headers

    def answer(self, channel: str, response: httpx.Response) -> Revision:
        """The revision a channel read answered: the remembered one on 304."""
        if response.status_code == 304:
            return copy.deepcopy(self._last[channel][1])
        return self.saw_revision(read_json(response), response.headers.get("ETag"))
