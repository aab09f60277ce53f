"""Adapter versions: register (publisher), list/show/lineage, approve/reject/revoke."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Response
from pydantic import Field

from registry.api.deps import Approver, Publisher, Reader, StateDep
from registry.api.responses import READ, errors
from registry.api.routes import PREFIX
from registry.api.schema_types import TagFilter, TagKey, Tags
from registry.api.schemas import (
    MAX_DB_INT,
    AdapterCreate,
    AdapterPage,
    AdapterPublic,
    DbId,
    Decision,
    In,
    LineagePublic,
    Out,
)
from registry.domain import AdapterState, AdapterVersion, Lineage, Page
from registry.names import ADAPTER_REF_PATTERN
from registry.services import (
    adapter_list,
    adapter_names,
    adapters,
    lifecycle,
    lineage,
    signatures,
    tags,
    trust_roots,
)

router = APIRouter(prefix=PREFIX, tags=["adapters"])

DECISION = errors(404, 401, 403, 409, 413, 422)
AdapterId = Annotated[int, Path(ge=1, le=MAX_DB_INT)]


class AdapterStatePublic(Out):
    id: int
    state: AdapterState


class AdapterStates(Out):
    states: list[AdapterStatePublic] = Field(
        description="The state of each id asked for that names a version, in id order."
    )


class TagUpdate(In):
    set: Tags = Field(default_factory=dict, description="Tags to set (key=value).")
    remove: list[TagKey] = Field(default_factory=list, max_length=64, description="Keys to drop.")


@router.post(
    "/adapters",
    response_model=AdapterPublic,
    status_code=201,
    responses=errors(404, 401, 403, 409, 413, 422),
)
def post_adapter(body: AdapterCreate, state: StateDep, actor: Publisher) -> AdapterVersion:
    draft = adapters.AdapterDraft(
        capability=body.capability,
        backbone=body.backbone,
        files=body.files,
        parent_id=body.parent_id,
        label=body.label,
        provenance=body.provenance.model_dump(),
        tags=body.tags,
    )
    root = trust_roots.enforced_root(database=state.db, strict=state.settings.strict)
    return signatures.register_signed_adapter(
        database=state.db,
        store=state.store,
        actor=actor,
        draft=draft,
        limits=state.settings.adapter_limits(),
        signature=body.signature,
        root=root,
    )


@router.get("/adapters", response_model=AdapterPage, responses=errors(*READ))
def get_adapters(
    state: StateDep,
    _reader: Reader,
    capability: str | None = None,
    backbone: str | None = None,
    adapter_state: Annotated[AdapterState | None, Query(alias="state")] = None,
    limit: Annotated[int, Query(ge=1, le=adapter_list.MAX_PAGE)] = 100,
    offset: Annotated[
        int,
        Query(
            ge=0,
            le=MAX_DB_INT,
            json_schema_extra={"maximum": adapter_list.MAX_OFFSET},
            description=f"Matches to skip, at most {adapter_list.MAX_OFFSET} (past it: 422). "
            "Deeper pages go by key with after=, whose cost does not grow with depth.",
        ),
    ] = 0,
    after: Annotated[
        int | None,
        Query(
            ge=0,
            le=MAX_DB_INT,
            description="The versions past this id (below it with sort=newest): keyset "
            "pages in the oldest and newest orders.",
        ),
    ] = None,
    tag: Annotated[
        list[TagFilter] | None,
        Query(max_length=64, description="KEY=VALUE; repeat: all must match."),
    ] = None,
    label: Annotated[str | None, Query(max_length=128)] = None,
    parent: Annotated[int | None, Query(ge=1, le=MAX_DB_INT, description="Parent id.")] = None,
    q: Annotated[
        str | None, Query(min_length=1, max_length=256, description="Text in the model card.")
    ] = None,
    sort: Annotated[
        Literal["oldest", "newest", "name", "state", "label"],
        Query(description="Order: oldest (default), newest, name, state or label first."),
    ] = "oldest",
) -> Page:
    with state.db.read() as session:
        return adapter_list.list_adapters(
            session=session,
            capability=capability,
            backbone=backbone,
            state=adapter_state.value if adapter_state is not None else None,
            limit=limit,
            offset=offset,
            after=after,
            tags=tag,
            label=label,
            parent_id=parent,
            text=q,
            sort=sort,
        )


@router.post(
    "/adapters/{adapter_id}/tags",
    response_model=AdapterPublic,
    responses=errors(404, 401, 403, 413, 422),
)
def post_tags(
    adapter_id: AdapterId, body: TagUpdate, state: StateDep, actor: Reader
) -> AdapterVersion:
    """Set and remove key=value tags of a version (any state): its publisher's principal
    (with a publisher token), approvers and admins; anyone else is 403."""
    with state.db.write() as session:
        row = adapters.find_adapter_row(session, adapter_id)
        return tags.set_tags(
            session=session, actor=actor, row=row, put=body.set, remove=body.remove
        )


@router.get("/adapters/by-name/{name}", response_model=AdapterPublic, responses=errors(404, *READ))
def get_adapter_by_name(
    name: Annotated[
        str,
        Path(
            max_length=80,
            pattern=ADAPTER_REF_PATTERN,
            description="`write@2`, or an id: `#6`, `6`.",
        ),
    ],
    state: StateDep,
    _reader: Reader,
    backbone: Annotated[
        str | None, Query(max_length=80, description="Backbone root (several backbones).")
    ] = None,
) -> AdapterVersion:
    """The version a person's name for it means: `capability@version` or an id."""
    with state.db.read() as session:
        return adapter_names.resolve_adapter(session=session, name=name, backbone=backbone)


@router.get("/adapters/states", response_model=AdapterStates, responses=errors(*READ))
def get_adapter_states(
    state: StateDep,
    _reader: Reader,
    ids: Annotated[
        list[DbId],
        Query(
            alias="id",
            min_length=1,
            max_length=adapter_names.MAX_STATES,
            description="An adapter id; repeat (up to 1,000). Ids of no version are left out.",
        ),
    ],
) -> dict[str, list[dict[str, object]]]:
    """The states of many versions in one request (a server re-checking what it serves)."""
    with state.db.read() as session:
        states = adapter_names.adapter_states(session, ids)
    return {"states": [{"id": i, "state": states[i]} for i in sorted(states)]}


@router.get("/adapters/{adapter_id}", response_model=AdapterPublic, responses=errors(404, *READ))
def get_adapter(adapter_id: AdapterId, state: StateDep, _reader: Reader) -> AdapterVersion:
    with state.db.read() as session:
        adapter = adapters.get_adapter(session=session, adapter_id=adapter_id)
        return adapter_names.with_approver(session, adapter)


@router.get(
    "/adapters/{adapter_id}/lineage", response_model=LineagePublic, responses=errors(404, *READ)
)
def get_lineage(adapter_id: AdapterId, state: StateDep, _reader: Reader) -> Lineage:
    with state.db.read() as session:
        return lineage.lineage(session=session, adapter_id=adapter_id)


@router.post("/adapters/{adapter_id}/approve", response_model=AdapterPublic, responses=DECISION)
def approve(
    adapter_id: AdapterId, body: Decision, state: StateDep, actor: Approver
) -> AdapterVersion:
    root = trust_roots.enforced_root(database=state.db, strict=state.settings.strict)
    with state.db.write() as session:
        signatures.require_signed_approval(session=session, root=root, adapter_id=adapter_id)
        return lifecycle.approve_adapter(
            session=session, actor=actor, adapter_id=adapter_id, reason=body.reason
        )


@router.post("/adapters/{adapter_id}/reject", response_model=AdapterPublic, responses=DECISION)
def reject(
    adapter_id: AdapterId, body: Decision, state: StateDep, actor: Approver
) -> AdapterVersion:
    with state.db.write() as session:
        return lifecycle.reject_adapter(
            session=session, actor=actor, adapter_id=adapter_id, reason=body.reason
        )


MOVED = "X-Weact-Channel-Revisions"


@router.post(
    "/adapters/{adapter_id}/revoke",
    response_model=AdapterPublic,
    responses={
        200: {
            "description": "Revoked; every channel that served it has a new revision.",
            "headers": {
                MOVED: {
                    "description": "The revisions the revoke appended, "
                    "`<channel>=<revision>` separated by commas (empty when none).",
                    "schema": {"type": "string"},
                }
            },
        },
        **DECISION,
    },
)
def revoke(
    adapter_id: AdapterId, body: Decision, state: StateDep, actor: Approver, response: Response
) -> AdapterVersion:
    with state.db.write() as session:
        adapter, moved = lifecycle.revoke_adapter_moving_heads(
            session=session, actor=actor, adapter_id=adapter_id, reason=body.reason
        )
    state.notifier.notify()
    response.headers[MOVED] = ",".join(f"{r.channel}={r.revision}" for r in moved)
    return adapter
