"""The audit log and its verification."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from registry.api.deps import Reader, StateDep
from registry.api.responses import READ, errors
from registry.api.routes import PREFIX
from registry.api.schemas import MAX_DB_INT, EventPublic, VerifyPublic
from registry.domain import Event, VerifyReport
from registry.services import events

router = APIRouter(prefix=PREFIX, tags=["events"])


@router.get("/events", response_model=list[EventPublic], responses=errors(*READ))
def get_events(
    state: StateDep,
    _reader: Reader,
    after: Annotated[int, Query(ge=0, le=MAX_DB_INT)] = 0,
    limit: Annotated[int, Query(ge=1, le=events.MAX_EVENTS)] = 100,
) -> list[Event]:
    with state.db.read() as session:
        return events.list_events(session=session, after=after, limit=limit)


@router.get("/events/verify", response_model=VerifyPublic, responses=errors(*READ))
def get_verify(state: StateDep, _reader: Reader) -> VerifyReport:
    with state.db.read() as session:
        return events.verify(session=session)
