"""API tokens (admin)."""

from __future__ import annotations

from fastapi import APIRouter

from registry.api.deps import Admin, StateDep
from registry.api.responses import errors
from registry.api.schemas import TokenCreate, TokenCreated
from registry.services.tokens import create_token

router = APIRouter(tags=["tokens"])


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
