"""Liveness (no token needed) and Prometheus metrics (a token of any role, unless the
``WEACT_METRICS_PUBLIC`` setting opens them)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response
from fastapi.security import HTTPAuthorizationCredentials
from prometheus_client import CONTENT_TYPE_LATEST

from registry.api.deps import StateDep, bearer, get_principal
from registry.api.responses import READ, errors
from registry.api.routes import PREFIX
from registry.api.schemas import Health
from registry.auth import Permission, authorize

router = APIRouter(prefix=PREFIX, tags=["health"])


@router.get("/healthz", response_model=Health, responses=errors(413))
def healthz() -> Health:
    return Health(status="ok")


async def metrics_access(
    state: StateDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    """A reader's token at least, unless the settings open the metrics to anyone."""
    if state.settings.metrics_public:
        return
    authorize(await get_principal(state, credentials), Permission.READ)


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text exposition format.",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        **errors(*READ),
    },
    dependencies=[Depends(metrics_access)],
)
def metrics(state: StateDep) -> Response:
    return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
