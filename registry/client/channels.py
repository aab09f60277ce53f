"""The channel endpoints: read (never older than a revision this client saw, `seen`),
long-poll and watch, gate, promote and rollback (docs/CONTRACTS.md section 2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from registry.client.base import EndpointBase
from registry.client.records import GateReport, PromoteResult, Revision
from registry.client.transport import read_json
from registry.client.watch import ChannelWatch
from registry.errors import NotFoundError

if TYPE_CHECKING:  # securesystemslib and tuf load only when a revision is signed
    from securesystemslib.signer import Signer


class ChannelEndpoints(EndpointBase):
    """Channels: what a node follows and what a promotion moves."""

    def list_channels(self) -> list[Revision]:
        return [self.seen.saw_revision(r) for r in self._get("/channels")]

    def get_channel(self, name: str) -> Revision:
        """The current revision, never older than one this client saw (`seen.py`)."""
        headers = self.seen.request_headers(name)
        response = self._transport.request(
            "GET", f"/channels/{name}", answers=(304,), headers=headers
        )
        return self.seen.answer(name, response)

    def channel_revisions(self, name: str) -> list[Revision]:
        return cast(list[Revision], self._get(f"/channels/{name}/revisions"))

    def wait_for_channel(self, name: str, *, after: int, wait: float = 30.0) -> Revision | None:
        """Long-poll: the channel's revision once it passes `after`, or None after `wait` s."""
        response = self._transport.request(
            "GET",
            f"/channels/{name}",
            answers=(304,),
            params={"after": after, "wait": wait},
            timeout=wait + self.timeout,
        )
        if response.status_code == 304:
            return None
        return self.seen.saw_revision(read_json(response))

    def channel_watch(self) -> ChannelWatch:
        """An async, cancellable long-poll on the same registry and token (`watch.py`)."""
        return ChannelWatch(self.url, self._transport.token, self.timeout)

    def gate(
        self,
        channel: str,
        adapters: Mapping[str, int | None],
        *,
        backbone: str | None = None,
        order: Sequence[str] | None = None,
        expected_revision: int | None = None,
        create: bool = False,
    ) -> GateReport:
        """Dry run of a promotion: the gate report, nothing written (`create`: the
        promotion would create the channel; without it an unknown channel is not found)."""
        body = _promote_request(adapters, backbone, order, expected_revision, None, create)
        return cast(GateReport, self._post(f"/channels/{channel}/gate", body))

    def promote(
        self,
        channel: str,
        adapters: Mapping[str, int | None],
        *,
        backbone: str | None = None,
        order: Sequence[str] | None = None,
        expected_revision: int | None = None,
        reason: str | None = None,
        create: bool = False,
        signer: Signer | None = None,
    ) -> PromoteResult:
        """Merge `adapters` into the channel's library as a new revision (gate first).

        A channel that does not exist is `NotFoundError` unless `create` is given (a typo
        never makes a new channel). `backbone` is needed for a new channel only when the
        adapters do not name one between them. A failed gate raises `GateFailedError` whose
        detail is the gate report. With `signer` (an approver's key) the new revision is
        signed here and the signature stored (`sign_channel_revision`).
        """
        body = _promote_request(adapters, backbone, order, expected_revision, reason, create)
        result = cast(PromoteResult, self._post(f"/channels/{channel}/promote", body))
        self.seen.saw_revision(result["revision"])
        if signer is not None:
            self._sign(result["revision"], signer)
        return result

    def rollback(
        self,
        channel: str,
        *,
        to_revision: int,
        expected_revision: int | None = None,
        reason: str | None = None,
        signer: Signer | None = None,
    ) -> Revision:
        body = {
            "to_revision": to_revision,
            "expected_revision": expected_revision,
            "reason": reason,
        }
        revision = self.seen.saw_revision(self._post(f"/channels/{channel}/rollback", body))
        if signer is not None:
            self._sign(revision, signer)
        return revision

    # -- signed revisions (registry.trust.channel) ----------------------------------------
    def channel_revision(self, channel: str, number: int) -> Revision:
        for revision in self.channel_revisions(channel):
            if int(revision["revision"]) == number:
                return revision
        raise NotFoundError(f"channel {channel!r} has no revision {number}")

    def sign_channel_revision(self, channel: str, number: int, signer: Signer) -> dict[str, Any]:
        """Sign revision `number` as the registry serves it, here, and store the signature."""
        return self._sign(self.channel_revision(channel, number), signer)

    def _sign(self, revision: Revision, signer: Signer) -> dict[str, Any]:
        from registry.trust.channel import sign_revision

        signature = sign_revision(revision, signer)
        path = f"/channels/{revision['channel']}/revisions/{revision['revision']}/signatures"
        return cast(dict[str, Any], self._post(path, {"signature": signature}))

    def revision_metadata(self, channel: str, number: int) -> dict[str, Any]:
        """The revision's TUF metadata with the approvers' signatures stored for it."""
        return cast(dict[str, Any], self._get(f"/channels/{channel}/revisions/{number}/metadata"))

    def channel_timestamp(self, channel: str) -> dict[str, Any]:
        """The registry's signed timestamp of the channel's current revision."""
        return cast(dict[str, Any], self._get(f"/channels/{channel}/timestamp"))

    def require_benchmarks(self, channel: str, benchmarks: Sequence[str]) -> Revision:
        """Set the benchmarks every gate of `channel` must judge ([] requires none)."""
        body = {"benchmarks": list(benchmarks)}
        path = f"/channels/{channel}/required-benchmarks"
        return cast(Revision, self._transport.json("PUT", path, json=body))


def _promote_request(
    adapters: Mapping[str, int | None],
    backbone: str | None,
    order: Sequence[str] | None,
    expected_revision: int | None,
    reason: str | None,
    create: bool = False,
) -> dict[str, Any]:
    return {
        "create": create,
        "backbone": backbone,
        "adapters": dict(adapters),
        "order": list(order) if order is not None else None,
        "expected_revision": expected_revision,
        "reason": reason,
    }
