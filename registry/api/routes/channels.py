"""Channels: current revision (ETag, long-poll), history, gate dry run, promote, rollback."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Header, Query, Response
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from registry.api.deps import Approver, Reader, StateDep
from registry.api.paths import ChannelName
from registry.api.responses import READ, errors
from registry.api.routes import PREFIX
from registry.api.schemas import (
    MAX_DB_INT,
    GateReportPublic,
    In,
    PromotePublic,
    PromoteRequest,
    RevisionPublic,
    RollbackRequest,
)
from registry.domain import GateReport, PromoteResult, Revision
from registry.names import check_name
from registry.services import channels, gate_requirements
from registry.services.read_cache import ChannelHead, etag_of, revisions_named

router = APIRouter(prefix=PREFIX, tags=["channels"])


def _head_response(head: ChannelHead, if_none_match: str | None) -> Response:
    if if_none_match is not None and head.etag in {t.strip() for t in if_none_match.split(",")}:
        return Response(status_code=304, headers={"ETag": head.etag})
    return Response(head.body, media_type="application/json", headers={"ETag": head.etag})


async def _head(state: StateDep, name: str, seen: int) -> ChannelHead:
    """From memory unless it may be stale or older than `seen`; else the database."""
    cached = state.channels.cached(name, seen)
    if cached is not None:
        return cached
    return await run_in_threadpool(state.channels.read, name)


def _head_number(state: StateDep, name: str) -> int:
    with state.db.read() as session:
        return channels.head_number(session=session, channel=name)


async def _long_poll(state: StateDep, name: str, after: int, wait: float) -> ChannelHead | None:
    """The head once it passes ``after``, or None when ``wait`` seconds pass first.

    Woken by the notifier (this process's writes, and every process's through the bus);
    without a working bus it re-reads the head every ``long_poll_interval_s``. A stopping
    server answers at once.
    """
    settings, notifier = state.settings, state.notifier
    deadline = time.monotonic() + min(wait, settings.long_poll_max_s)
    while True:
        seen = notifier.generation  # before the read: a wake after it is never missed
        newer = await _newer(state, name, after)
        if newer is not None:
            return newer
        remaining = deadline - time.monotonic()
        if remaining <= 0 or notifier.closed:
            return None
        pause = remaining if notifier.cross_process else settings.long_poll_interval_s
        await notifier.wait(min(pause, remaining), since=seen)


async def _newer(state: StateDep, name: str, after: int) -> ChannelHead | None:
    """The head if it passes `after`: from memory when current; while every write wakes the
    notifier, one read shared by all waiters of the channel; else a cheap head check first."""
    cached = state.channels.cached(name)
    if cached is not None:
        return cached if cached.revision.revision > after else None
    if state.notifier.cross_process:
        current = await state.notifier.shared(
            f"channel:{name}", lambda: run_in_threadpool(state.channels.read, name)
        )
        return current if current.revision.revision > after else None
    if await run_in_threadpool(_head_number, state, name) > after:
        return await run_in_threadpool(state.channels.read, name)
    return None


@router.get("/channels", response_model=list[RevisionPublic], responses=errors(*READ))
def get_channels(state: StateDep, _reader: Reader) -> list[Revision]:
    with state.db.read() as session:
        return channels.list_channels(session=session)


_ETAG = {"ETag": {"description": '`"<channel>:<revision>"`', "schema": {"type": "string"}}}


@router.get(
    "/channels/{name}",
    response_model=RevisionPublic,
    responses={
        200: {"description": "The channel's current revision.", "headers": _ETAG},
        304: {
            "description": "Not modified (`If-None-Match` names the current revision), or "
            "nothing newer than `after` within `wait`.",
            "headers": _ETAG,
        },
        **errors(404, *READ),
    },
)
async def get_channel(
    name: ChannelName,
    state: StateDep,
    _reader: Reader,
    after: Annotated[int | None, Query(ge=0, le=MAX_DB_INT)] = None,
    wait: Annotated[float, Query(ge=0, le=3600)] = 0.0,
    if_none_match: Annotated[str | None, Header()] = None,
    x_weact_min_revision: Annotated[
        int,
        Header(
            ge=0,
            le=MAX_DB_INT,
            description="The highest revision of this channel the client has seen: the "
            "answer is never older (served from memory only when it is current enough).",
        ),
    ] = 0,
) -> Response:
    check_name("channel", name)
    if after is None:  # an ETag the client holds names a revision it has seen, too
        seen = max(x_weact_min_revision, revisions_named(name, if_none_match))
        return _head_response(await _head(state, name, seen), if_none_match)
    head = await _long_poll(state, name, after, wait)
    if head is None:
        return Response(status_code=304, headers={"ETag": etag_of(name, after)})
    return _head_response(head, None)


@router.get(
    "/channels/{name}/revisions",
    response_model=list[RevisionPublic],
    responses=errors(404, *READ),
)
def get_revisions(name: ChannelName, state: StateDep, _reader: Reader) -> list[Revision]:
    check_name("channel", name)
    with state.db.read() as session:
        return channels.list_revisions(session=session, channel=name)


def _request(name: str, body: PromoteRequest) -> channels.PromoteRequest:
    return channels.PromoteRequest(channel=name, **body.model_dump())


@router.post(
    "/channels/{name}/gate", response_model=GateReportPublic, responses=errors(404, 409, *READ)
)
def post_gate(
    name: ChannelName, body: PromoteRequest, state: StateDep, _reader: Reader
) -> GateReport:
    with state.db.read() as session:
        return channels.dry_run_gate(session=session, request=_request(name, body))


@router.post(
    "/channels/{name}/promote",
    response_model=PromotePublic,
    status_code=201,
    responses=errors(404, 401, 403, 409, 413, 422),
)
def post_promote(
    name: ChannelName, body: PromoteRequest, state: StateDep, actor: Approver
) -> PromoteResult:
    with state.db.write() as session:
        result = channels.promote(session=session, actor=actor, request=_request(name, body))
    state.notifier.notify()
    return result


@router.post(
    "/channels/{name}/rollback",
    response_model=RevisionPublic,
    status_code=201,
    responses=errors(404, 401, 403, 409, 413, 422),
)
def post_rollback(
    name: ChannelName, body: RollbackRequest, state: StateDep, actor: Approver
) -> Revision:
    with state.db.write() as session:
        revision = channels.rollback(
            session=session,
            actor=actor,
            channel=name,
            to_revision=body.to_revision,
            expected_revision=body.expected_revision,
            reason=body.reason,
        )
    state.notifier.notify()
    return revision


class RequiredBenchmarks(In):
    benchmarks: list[Annotated[str, Field(min_length=1, max_length=128)]] = Field(
        max_length=64, description="Benchmark names every gate must judge; [] requires none."
    )


@router.put(
    "/channels/{name}/required-benchmarks",
    response_model=RevisionPublic,
    responses=errors(404, 401, 403, 413, 422),
)
def put_required_benchmarks(
    name: ChannelName, body: RequiredBenchmarks, state: StateDep, actor: Approver
) -> Revision:
    """Set the benchmarks every promotion's gate of the channel must judge (approver)."""
    with state.db.write() as session:
        head = gate_requirements.require_benchmarks(
            session=session, actor=actor, channel=name, benchmarks=body.benchmarks
        )
    state.notifier.notify()
    return head
