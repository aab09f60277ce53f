"""API tokens (admin): create (the secret once), list (never a secret), revoke."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from registry.api.deps import Admin, StateDep
from registry.api.responses import errors
from registry.api.routes import PREFIX
from registry.api.schemas import MAX_DB_INT, TokenCreate, TokenCreated, TokenPublic
from registry.domain import TokenInfo
from registry.services.tokens import create_token, list_tokens, revoke_token

router = APIRouter(prefix=PREFIX, tags=["tokens"])
TokenId = Annotated[int, Path(ge=1, le=MAX_DB_INT)]


@router.post(
    "/tokens", response_model=TokenCreated, status_code=201, responses=errors(401, 403, 413, 422)
)
def post_token(body: TokenCreate, state: StateDep, actor: Admin) -> TokenCreated:
    with state.db.write() as session:
        info, secret = create_token(
            session=session,
            name=body.name,
            role=body.role,
            actor=actor.name,
            node_id=body.node_id,
            principal=body.principal,
        )
    return TokenCreated(
        id=info.id, name=info.name, role=info.role, token=secret, node_id=info.node_id
    )


@router.get("/tokens", response_model=list[TokenPublic], responses=errors(401, 403, 413, 422))
def get_tokens(state: StateDep, _actor: Admin) -> list[TokenInfo]:
    with state.db.read() as session:
        return list_tokens(session=session)


@router.post(
    "/tokens/{token_id}/revoke",
    response_model=TokenPublic,
    responses=errors(401, 403, 404, 409, 413, 422),
)
def post_revoke_token(token_id: TokenId, state: StateDep, actor: Admin) -> TokenInfo:
    with state.db.write() as session:
        revoked = revoke_token(session=session, token_id=token_id, actor=actor.name)
    state.token_changes.notify()  # every process drops cached tokens now; no long-poll wakes
    return revoked
