"""Content-addressed blobs: PUT streams and verifies, GET streams and verifies, hashing each
byte once (or redirects to S3)."""

from __future__ import annotations

from typing import IO, Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, RedirectResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from registry.api.deps import Publisher, Reader, StateDep
from registry.api.paths import Sha256
from registry.api.responses import READ, errors
from registry.api.routes import PREFIX
from registry.api.schemas import BlobPublic
from registry.domain import Principal
from registry.errors import DigestMismatchError
from registry.services import blobs

router = APIRouter(prefix=PREFIX, tags=["blobs"])

BINARY = {"schema": {"type": "string", "format": "binary"}}
PUT_BODY = {"requestBody": {"required": True, "content": {"application/octet-stream": BINARY}}}
PUT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": BlobPublic, "description": "The blob was already stored."},
    201: {"model": BlobPublic, "description": "Stored."},
    **errors(403, 409, *READ),
}
GET_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "The blob's bytes.", "content": {"application/octet-stream": BINARY}},
    307: {"description": "Large blob on S3: a presigned URL in `Location`."},
    **errors(404, *READ),
}


def _claim(state: StateDep, digest: str, spool: IO[bytes]) -> None:
    with state.db.write() as session:
        blobs.claim_blob(session=session, store=state.store, digest=digest, source=spool)


@router.put(
    "/blobs/{digest}",
    status_code=201,
    responses=PUT_RESPONSES,
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/octet-stream": BINARY}}
    },
)
async def put_blob(
    digest: Sha256, request: Request, state: StateDep, _actor: Publisher
) -> Response:
    blobs.check_digest(digest)
    limit = state.settings.max_body_bytes
    spool = await blobs.spool_upload(request.stream(), expected_sha256=digest, max_bytes=limit)
    try:
        blob = await run_in_threadpool(
            blobs.put_blob, store=state.store, source=spool, digest=digest
        )
        await run_in_threadpool(_claim, state, digest, spool)
    finally:
        spool.close()
    body = {"digest": blob.digest, "size": blob.size}
    return JSONResponse(body, status_code=201 if blob.created else 200)


def _verified(state: StateDep, actor: Principal, digest: str) -> bytes | None:
    """A small blob's bytes, verified before any is sent (a corrupted one is audited, then
    422); None for a large one, verified as it streams."""
    try:
        return blobs.read_verified(store=state.store, digest=digest)
    except DigestMismatchError as exc:
        _audit_corruption(state, actor, digest, exc)
        raise


def _audit_corruption(
    state: StateDep, actor: Principal, digest: str, error: DigestMismatchError
) -> None:
    with state.db.write() as session:
        blobs.record_corruption(session=session, actor=actor, digest=digest, error=error)


def _blob_response(digest: str, state: StateDep, actor: Principal, *, head: bool) -> Response:
    size = blobs.blob_size(store=state.store, digest=digest)
    settings = state.settings
    url = blobs.presigned_url(
        store=state.store,
        digest=digest,
        size=size,
        threshold=settings.presign_threshold_bytes,
        expires=settings.presign_expires_s,
    )
    if url is not None:
        return RedirectResponse(url, status_code=307)
    headers = {"Content-Length": str(size), "ETag": f'"{digest}"'}
    if head:
        return Response(headers=headers, media_type="application/octet-stream")
    data = _verified(state, actor, digest)
    if data is not None:
        return Response(data, headers=headers, media_type="application/octet-stream")
    stream = blobs.iter_blob(
        store=state.store,
        digest=digest,
        on_corrupt=lambda error: _audit_corruption(state, actor, digest, error),
    )
    return StreamingResponse(stream, headers=headers, media_type="application/octet-stream")


@router.get("/blobs/{digest}", response_class=Response, responses=GET_RESPONSES)
def get_blob(digest: Sha256, state: StateDep, actor: Reader) -> Response:
    return _blob_response(digest, state, actor, head=False)


@router.head("/blobs/{digest}", response_class=Response, responses=GET_RESPONSES)
def head_blob(digest: Sha256, state: StateDep, actor: Reader) -> Response:
    return _blob_response(digest, state, actor, head=True)
