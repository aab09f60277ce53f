"""Channels: current revision (ETag, long-poll), history, gate dry run, promote, rollback."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Header, Query, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from registry.api.deps import Approver, Reader, StateDep
from registry.api.responses import READ, errors
from registry.api.schemas import (
    MAX_DB_INT,
    GateReportPublic,
    PromotePublic,
    PromoteRequest,
    RevisionPublic,
    RollbackRequest,
)
from registry.domain import GateReport, PromoteResult, Revision
from registry.names import check_name
from registry.services import channels

router = APIRouter(tags=["channels"])


def _etag(channel: str, revision: int) -> str:
    return f'"{channel}:{revision}"'


def _revision_response(revision: Revision, if_none_match: str | None) -> Response:
    etag = _etag(revision.channel, revision.revision)
    if if_none_match is not None and etag in {t.strip() for t in if_none_match.split(",")}:
        return Response(status_code=304, headers={"ETag": etag})
    body = RevisionPublic.model_validate(revision).model_dump(mode="json")
    return JSONResponse(body, headers={"ETag": etag})


def _current(state: StateDep, name: str) -> Revision:
    with state.db.read() as session:
        return channels.get_revision(session=session, channel=name)


def _head(state: StateDep, name: str) -> int:
    with state.db.read() as session:
        return channels.head_number(session=session, channel=name)


async def _long_poll(state: StateDep, name: str, after: int, wait: float) -> Revision | None:
    """The revision once it passes ``after``, or None when ``wait`` seconds pass first.

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


async def _newer(state: StateDep, name: str, after: int) -> Revision | None:
    """The current revision if it passes `after`: while every write wakes the notifier, one
    read shared by all waiters of the channel; else a cheap head check first."""
    if state.notifier.cross_process:
        current = await state.notifier.shared(
            f"channel:{name}", lambda: run_in_threadpool(_current, state, name)
        )
        return current if current.revision > after else None
    if await run_in_threadpool(_head, state, name) > after:
        return await run_in_threadpool(_current, state, name)
    return None


@router.get("/channels", response_model=list[RevisionPublic], responses=errors(*READ))
def get_channels(state: StateDep, _reader: Reader) -> list[Revision]:
    with state.db.read() as session:
        return channels.list_channels(session=session)


@router.get(
    "/channels/{name}",
    response_model=RevisionPublic,
    responses={
        304: {"description": "Not modified / nothing newer within `wait`."},
        **errors(404, *READ),
    },
)
async def get_channel(
    name: str,
    state: StateDep,
    _reader: Reader,
    after: Annotated[int | None, Query(ge=0, le=MAX_DB_INT)] = None,
    wait: Annotated[float, Query(ge=0, le=3600)] = 0.0,
    if_none_match: Annotated[str | None, Header()] = None,
) -> Response:
    check_name("channel", name)
    if after is None:
        if if_none_match is not None:  # a cheap check first: most polls change nothing
            etag = _etag(name, await run_in_threadpool(_head, state, name))
            if etag in {t.strip() for t in if_none_match.split(",")}:
                return Response(status_code=304, headers={"ETag": etag})
        return _revision_response(await run_in_threadpool(_current, state, name), if_none_match)
    revision = await _long_poll(state, name, after, wait)
    if revision is None:
        return Response(status_code=304, headers={"ETag": _etag(name, after)})
    return _revision_response(revision, None)


@router.get(
    "/channels/{name}/revisions",
    response_model=list[RevisionPublic],
    responses=errors(404, *READ),
)
def get_revisions(name: str, state: StateDep, _reader: Reader) -> list[Revision]:
    check_name("channel", name)
    with state.db.read() as session:
        return channels.list_revisions(session=session, channel=name)


def _request(name: str, body: PromoteRequest) -> channels.PromoteRequest:
    return channels.PromoteRequest(channel=name, **body.model_dump())


@router.post(
    "/channels/{name}/gate", response_model=GateReportPublic, responses=errors(404, 409, *READ)
)
def post_gate(name: str, body: PromoteRequest, state: StateDep, _reader: Reader) -> GateReport:
    with state.db.read() as session:
        return channels.dry_run_gate(session=session, request=_request(name, body))


@router.post(
    "/channels/{name}/promote",
    response_model=PromotePublic,
    status_code=201,
    responses=errors(404, 401, 403, 409, 413, 422),
)
def post_promote(
    name: str, body: PromoteRequest, state: StateDep, actor: Approver
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
def post_rollback(name: str, body: RollbackRequest, state: StateDep, actor: Approver) -> Revision:
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
