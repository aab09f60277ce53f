"""Signatures of adapter identities (registry.trust): add one, list them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path

from registry.api.deps import Reader, StateDep
from registry.api.responses import READ, errors
from registry.api.routes import PREFIX
from registry.api.schema_types import JsonObject
from registry.api.schemas import MAX_DB_INT, In, Out
from registry.services import signatures, trust_roots

router = APIRouter(prefix=PREFIX, tags=["signatures"])

AdapterId = Annotated[int, Path(ge=1, le=MAX_DB_INT)]


class SignatureCreate(In):
    envelope: JsonObject  # a DSSE envelope of the adapter's in-toto statement


class SignatureAdded(Out):
    adapter_id: int
    kind: str
    keyid: str


class SignaturePublic(Out):
    kind: str
    keyid: str
    envelope: dict[str, Any]
    created_by: str
    created_at: datetime


class SignatureList(Out):
    adapter_id: int
    strict: bool  # whether this registry refuses unsigned pushes and approvals
    items: list[SignaturePublic]


@router.post(
    "/adapters/{adapter_id}/signatures",
    response_model=SignatureAdded,
    status_code=201,
    responses=errors(404, 401, 403, 409, 413, 422),
)
def post_signature(
    adapter_id: AdapterId, body: SignatureCreate, state: StateDep, actor: Reader
) -> dict[str, Any]:
    """A publisher's or an approver's signature of the version's identity (which one the
    signed statement says; the token must have that role)."""
    root = trust_roots.enforced_root(database=state.db, strict=state.settings.strict)
    with state.db.write() as session:
        return signatures.add_signature(
            session=session, actor=actor, adapter_id=adapter_id, envelope=body.envelope, root=root
        )


@router.get(
    "/adapters/{adapter_id}/signatures",
    response_model=SignatureList,
    responses=errors(404, *READ),
)
def get_signatures(adapter_id: AdapterId, state: StateDep, _reader: Reader) -> dict[str, Any]:
    """Every signature stored for the version; what counts is for the verifier's root."""
    with state.db.read() as session:
        items = signatures.list_signatures(session=session, adapter_id=adapter_id)
    return {"adapter_id": adapter_id, "strict": state.settings.strict, "items": items}
