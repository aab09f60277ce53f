"""Dependencies arrive as ``Annotated`` aliases: the app state and the calling principal."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from registry.api.metrics import Metrics
from registry.api.notify import Changes, ChannelNotifier
from registry.api.shared_loads import SharedLoads
from registry.auth import Permission, action_of, authorize, hash_token
from registry.db.session import Database
from registry.domain import Principal
from registry.services.read_cache import ChannelReads, TokenReads
from registry.settings import Settings
from storage import BlobStore


@dataclass
class AppState:
    settings: Settings
    db: Database
    store: BlobStore
    metrics: Metrics
    notifier: ChannelNotifier  # channel revisions: wakes long-polls
    token_changes: Changes  # token revocations: drop cached tokens
    channels: ChannelReads
    tokens: TokenReads
    token_loads: SharedLoads = field(default_factory=SharedLoads)  # misses read once


async def get_state(request: Request) -> AppState:
    """Async on purpose: a sync dependency would cost a threadpool hop per request."""
    state: AppState = request.app.state.weact
    return state


StateDep = Annotated[AppState, Depends(get_state)]

bearer = HTTPBearer(auto_error=False, description="A token from `weact token create`.")


async def get_principal(
    state: StateDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    """From memory when this token was seen lately (`TokenReads`), else the database: one
    read for the requests that miss it together (`SharedLoads`)."""
    token = credentials.credentials if credentials is not None else None
    principal = state.tokens.cached(token)
    if principal is not None:
        return principal
    if not token:
        return await run_in_threadpool(state.tokens.authenticate, token)
    return await state.token_loads.load(
        hash_token(token),
        state.tokens.stamp(),
        lambda: run_in_threadpool(state.tokens.authenticate, token),
    )


def require(permission: Permission) -> Callable[..., Awaitable[Principal]]:
    async def dependency(
        request: Request, principal: Annotated[Principal, Depends(get_principal)]
    ) -> Principal:
        authorize(principal, permission, action_of(request.method, request.url.path))
        return principal

    return dependency


Reader = Annotated[Principal, Depends(require(Permission.READ))]
Publisher = Annotated[Principal, Depends(require(Permission.PUBLISH))]
Evaluator = Annotated[Principal, Depends(require(Permission.EVALUATE))]
Approver = Annotated[Principal, Depends(require(Permission.APPROVE))]
NodeRole = Annotated[Principal, Depends(require(Permission.HEARTBEAT))]
Admin = Annotated[Principal, Depends(require(Permission.ADMIN))]
