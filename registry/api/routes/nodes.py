"""Runtime node heartbeats (node role) and the node list."""

from __future__ import annotations

from fastapi import APIRouter

from registry.api.deps import NodeRole, Reader, StateDep
from registry.api.responses import READ, errors
from registry.api.schemas import HeartbeatIn, NodePublic
from registry.domain import Node
from registry.services import nodes

router = APIRouter(tags=["nodes"])


@router.post(
    "/nodes/{node_id}/heartbeat",
    response_model=NodePublic,
    responses=errors(401, 403, 409, 413, 422),
)
def post_heartbeat(node_id: str, body: HeartbeatIn, state: StateDep, actor: NodeRole) -> Node:
    with state.db.write() as session:
        return nodes.heartbeat(
            session=session,
            actor=actor,
            node_id=node_id,
            channel=body.channel,
            revision=body.revision,
            audit=body.audit.model_dump(),
        )


@router.get("/nodes", response_model=list[NodePublic], responses=errors(*READ))
def get_nodes(state: StateDep, _reader: Reader) -> list[Node]:
    with state.db.read() as session:
        return nodes.list_nodes(session=session)
