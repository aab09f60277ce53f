"""Runtime node heartbeats (node role) and the node list, against their channels' heads."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import Field

from registry.api.deps import NodeRole, Reader, StateDep
from registry.api.responses import READ, errors
from registry.api.schemas import EventPublic, HeartbeatIn, In, NodePublic
from registry.domain import Event
from registry.services import fleet_health, heartbeats

router = APIRouter(tags=["nodes"])


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
def post_heartbeat(node_id: str, body: HeartbeatIn, state: StateDep, actor: NodeRole) -> NodePublic:
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
        )
        return NodePublic.of(fleet_health.status_of(session=session, node=node))


@router.post(
    "/nodes/{node_id}/events",
    response_model=EventPublic,
    status_code=201,
    responses=errors(401, 403, 422),
)
def post_node_event(node_id: str, body: NodeEventIn, state: StateDep, actor: NodeRole) -> Event:
    with state.db.write() as session:
        return heartbeats.report_event(
            session=session,
            actor=actor,
            node_id=node_id,
            kind=body.kind,
            adapter=body.adapter,
            detail=body.detail,
        )


@router.get("/nodes", response_model=list[NodePublic], responses=errors(*READ))
def get_nodes(state: StateDep, _reader: Reader) -> list[NodePublic]:
    with state.db.read() as session:
        return [NodePublic.of(s) for s in fleet_health.fleet_status(session=session)]
