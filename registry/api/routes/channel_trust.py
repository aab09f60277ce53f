"""Signed channel revisions (registry.trust.channel): their metadata and approvers'
signatures, and the registry's short-lived timestamp of a channel's current revision."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path

from registry.api.deps import Approver, Reader, StateDep
from registry.api.paths import ChannelName
from registry.api.responses import READ, errors
from registry.api.routes import PREFIX
from registry.api.schema_types import JsonObject
from registry.api.schemas import MAX_DB_INT, In, Out
from registry.names import check_name
from registry.services import channel_trust, trust_roots
from registry.services.revisions import get_revision

router = APIRouter(prefix=PREFIX, tags=["channels"])

RevisionNumber = Annotated[int, Path(ge=1, le=MAX_DB_INT)]


class RevisionSignatureCreate(In):
    signature: JsonObject  # {"keyid", "sig"}: a TUF signature of the revision's metadata


class RevisionSignatureAdded(Out):
    channel: str
    revision: int
    keyid: str


@router.get(
    "/channels/{name}/revisions/{number}/metadata",
    response_model=dict[str, Any],
    responses=errors(404, *READ),
)
def get_revision_metadata(
    name: ChannelName, number: RevisionNumber, state: StateDep, _reader: Reader
) -> dict[str, Any]:
    """The revision as TUF targets metadata, with every approver signature stored for it."""
    check_name("channel", name)
    with state.db.read() as session:
        return channel_trust.revision_metadata(session=session, channel=name, revision=number)


@router.post(
    "/channels/{name}/revisions/{number}/signatures",
    response_model=RevisionSignatureAdded,
    status_code=201,
    responses=errors(404, 401, 403, 409, 413, 422),
)
def post_revision_signature(
    name: ChannelName,
    number: RevisionNumber,
    body: RevisionSignatureCreate,
    state: StateDep,
    actor: Approver,
) -> dict[str, Any]:
    """An approver's signature of the revision's metadata (checked when strict)."""
    check_name("channel", name)
    root = trust_roots.enforced_root(database=state.db, strict=state.settings.strict)
    with state.db.write() as session:
        return channel_trust.add_revision_signature(
            session=session,
            actor=actor,
            channel=name,
            revision=number,
            signature=body.signature,
            root=root,
        )


@router.get(
    "/channels/{name}/timestamp", response_model=dict[str, Any], responses=errors(404, *READ)
)
def get_timestamp(name: ChannelName, state: StateDep, _reader: Reader) -> dict[str, Any]:
    """TUF timestamp metadata naming the channel's current revision and its digest, signed
    by the registry's timestamp key; short-lived (`WEACT_TIMESTAMP_EXPIRY_S`)."""
    check_name("channel", name)
    with state.db.read() as session:
        revision = get_revision(session=session, channel=name)
    return channel_trust.timestamp_signer(state.settings).current(revision)
