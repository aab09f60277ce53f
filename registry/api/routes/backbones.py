"""Backbones (register: admin)."""

from __future__ import annotations

from fastapi import APIRouter

from registry.api.deps import Admin, Reader, StateDep
from registry.api.responses import READ, errors
from registry.api.routes import PREFIX
from registry.api.schemas import BackboneCreate, BackbonePublic
from registry.domain import Backbone
from registry.services import backbones

router = APIRouter(prefix=PREFIX, tags=["backbones"])


@router.post(
    "/backbones",
    response_model=BackbonePublic,
    status_code=201,
    responses=errors(401, 403, 409, 413, 422),
)
def post_backbone(body: BackboneCreate, state: StateDep, actor: Admin) -> Backbone:
    prepared = backbones.prepare_backbone(
        store=state.store, name=body.name, manifest=body.manifest.model_dump()
    )
    with state.db.write() as session:
        return backbones.record_backbone(
            session=session, store=state.store, actor=actor, prepared=prepared
        )


@router.get("/backbones", response_model=list[BackbonePublic], responses=errors(*READ))
def get_backbones(state: StateDep, _reader: Reader) -> list[Backbone]:
    with state.db.read() as session:
        return backbones.list_backbones(session=session)


@router.get("/backbones/{key}", response_model=BackbonePublic, responses=errors(404, *READ))
def get_backbone(key: str, state: StateDep, _reader: Reader) -> Backbone:
    with state.db.read() as session:
        return backbones.get_backbone(session=session, key=key)
