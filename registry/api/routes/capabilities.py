"""Capabilities (create: admin)."""

from __future__ import annotations

from fastapi import APIRouter

from registry.api.deps import Admin, Reader, StateDep
from registry.api.paths import CapabilityName
from registry.api.responses import READ, errors
from registry.api.routes import PREFIX
from registry.api.schemas import CapabilityCreate, CapabilityPublic
from registry.domain import Capability
from registry.services import capabilities

router = APIRouter(prefix=PREFIX, tags=["capabilities"])


@router.post(
    "/capabilities",
    response_model=CapabilityPublic,
    status_code=201,
    responses=errors(401, 403, 409, 413, 422),
)
def post_capability(body: CapabilityCreate, state: StateDep, actor: Admin) -> Capability:
    with state.db.write() as session:
        return capabilities.create_capability(
            session=session,
            actor=actor,
            name=body.name,
            description=body.description,
            order=body.order,
        )


@router.get("/capabilities", response_model=list[CapabilityPublic], responses=errors(*READ))
def get_capabilities(state: StateDep, _reader: Reader) -> list[Capability]:
    with state.db.read() as session:
        return capabilities.list_capabilities(session=session)


@router.get("/capabilities/{name}", response_model=CapabilityPublic, responses=errors(404, *READ))
def get_capability(name: CapabilityName, state: StateDep, _reader: Reader) -> Capability:
    with state.db.read() as session:
        return capabilities.get_capability(session=session, name=name)
