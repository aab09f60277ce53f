"""Content-addressed blobs: PUT streams and verifies, GET streams (or redirects to S3)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, RedirectResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from registry.api.deps import Publisher, Reader, StateDep
from registry.errors import InvalidError, PayloadTooLargeError
from registry.services import blobs

router = APIRouter(tags=["blobs"])


def _declared_length(request: Request, limit: int) -> None:
    raw = request.headers.get("content-length")
    if raw is None:
        return
    if not raw.isdigit():
        raise InvalidError("Content-Length must be a non-negative integer")
    if int(raw) > limit:
        raise PayloadTooLargeError(f"blob is larger than the limit of {limit} bytes")


@router.put("/blobs/{digest}", status_code=201, responses={200: {}, 201: {}})
async def put_blob(digest: str, request: Request, state: StateDep, _actor: Publisher) -> Response:
    blobs.check_digest(digest)
    limit = state.settings.max_body_bytes
    _declared_length(request, limit)
    spool = await blobs.spool_upload(request.stream(), expected_sha256=digest, max_bytes=limit)
    try:
        blob = await run_in_threadpool(
            blobs.put_blob, store=state.store, source=spool, digest=digest
        )
    finally:
        spool.close()
    body = {"digest": blob.digest, "size": blob.size}
    return JSONResponse(body, status_code=201 if blob.created else 200)


def _blob_response(digest: str, state: StateDep, *, head: bool) -> Response:
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
    stream = blobs.iter_blob(store=state.store, digest=digest)
    return StreamingResponse(stream, headers=headers, media_type="application/octet-stream")


@router.get("/blobs/{digest}")
def get_blob(digest: str, state: StateDep, _reader: Reader) -> Response:
    return _blob_response(digest, state, head=False)


@router.head("/blobs/{digest}")
def head_blob(digest: str, state: StateDep, _reader: Reader) -> Response:
    return _blob_response(digest, state, head=True)
