"""Runtime node heartbeats (node role) and the node list, against their channels' heads."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import Field

from registry.api.deps import Admin, NodeRole, Reader, StateDep
from registry.api.paths import NodeId
from registry.api.responses import READ, errors
from registry.api.routes import PREFIX
from registry.api.schemas import MAX_DB_INT, EventPublic, HeartbeatIn, In, NodePublic, TokenPublic
from registry.domain import Event, TokenInfo
from registry.services import fleet_health, heartbeats
from registry.services.tokens import rebind_node

router = APIRouter(prefix=PREFIX, tags=["nodes"])


class NodeEventIn(In):
    """What a node refused on its own (a vLLM server's weights failing their check at load)."""

    kind: Literal["integrity.refused"]
    adapter: str = Field(max_length=128)  # the version, e.g. "write@2"
    detail: str = Field(max_length=4096)


@router.post(
    "/nodes/{node_id}/heartbeat",
    response_model=NodePublic,
    responses=errors(401, 403, 409, 413, 422),
)
def post_heartbeat(
    node_id: NodeId, body: HeartbeatIn, state: StateDep, actor: NodeRole
) -> NodePublic:
    with state.db.write() as session:
        node = heartbeats.heartbeat(
            session=session,
            actor=actor,
            node_id=node_id,
            channel=body.channel,
            revision=body.revision,
            audit=body.audit.model_dump(),
            library_digest=body.library_digest,
            stale=body.stale,
            lag=body.lag,
            heartbeat_s=body.heartbeat_s,
        )
        return NodePublic.of(fleet_health.status_of(session=session, node=node))


@router.post(
    "/nodes/{node_id}/events",
    response_model=EventPublic,
    status_code=201,
    responses=errors(401, 403, 413, 422),
)
def post_node_event(node_id: NodeId, body: NodeEventIn, state: StateDep, actor: NodeRole) -> Event:
    with state.db.write() as session:
        return heartbeats.report_event(
            session=session,
            actor=actor,
            node_id=node_id,
            kind=body.kind,
            adapter=body.adapter,
            detail=body.detail,
        )


class Rebind(In):
    token_id: int = Field(ge=1, le=MAX_DB_INT, description="The node token to own the id.")


@router.post(
    "/nodes/{node_id}/rebind",
    response_model=TokenPublic,
    responses=errors(401, 403, 404, 409, 413, 422),
)
def post_rebind(node_id: NodeId, body: Rebind, state: StateDep, actor: Admin) -> TokenInfo:
    """Make another node token the owner of a node id (admin). A node id belongs to the
    first token that claims it; another token's heartbeat for it is 403 until this call.
    The previous owner's token is revoked (a node token serves one node id)."""
    with state.db.write() as session:
        token = rebind_node(
            session=session, node_id=node_id, token_id=body.token_id, actor=actor.name
        )
    state.token_changes.notify()  # the previous owner's token is revoked: drop it from caches
    return token


@router.get("/nodes", response_model=list[NodePublic], responses=errors(*READ))
def get_nodes(state: StateDep, _reader: Reader) -> list[NodePublic]:
    with state.db.read() as session:
        return [NodePublic.of(s) for s in fleet_health.fleet_status(session=session)]
