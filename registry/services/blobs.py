"""Blobs: spool an upload while hashing it, then hand it to the store; stream or presign.

Serving reads and hashes each byte once. A blob under ``SERVE_FROM_MEMORY`` is read whole
and verified before the first byte goes out, so a tampered one is answered with
``digest_mismatch`` (and an audit event), never sent. A larger one is hashed while it
streams, its last piece held back until the digest is checked: a tampered one is audited and
its transfer broken off short of its ``Content-Length``, so no client takes it for whole.

Every PUT records a lease (``blob_leases.put_at``): ``weact gc`` spares a blob for its
grace period after its last PUT, the window in which a registration may still claim it.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
from collections.abc import AsyncIterable, Callable, Iterator
from typing import IO

from sqlalchemy.orm import Session

from registry.audit import append_event
from registry.db.models import SqlBlobLease, utcnow
from registry.domain import Blob, Principal
from registry.errors import DigestMismatchError, InvalidError, NotFoundError, PayloadTooLargeError
from registry.services.gc import guard_blobs
from registry.services.retry import with_retries
from storage import BlobNotFoundError, BlobStore, is_sha256
from storage import DigestMismatchError as StorageDigestMismatch

logger = logging.getLogger(__name__)

SPOOL_MEMORY_BYTES = 4 * 1024 * 1024
SERVE_FROM_MEMORY = 8 * 1024 * 1024
READ_CHUNK = 1024 * 1024


def check_digest(digest: str) -> str:
    if not is_sha256(digest):
        raise InvalidError(f"not a sha256 digest (64 lowercase hex characters): {digest!r}")
    return digest


async def spool_upload(
    chunks: AsyncIterable[bytes], *, expected_sha256: str, max_bytes: int
) -> IO[bytes]:
    """Copy an upload to a temp file, hashing it; refuse it before the store sees a byte.

    Raises ``PayloadTooLargeError`` past ``max_bytes`` and ``DigestMismatchError`` when the
    bytes do not hash to ``expected_sha256``. The returned file is rewound; close it.
    """
    hasher = hashlib.sha256()
    size = 0
    spool: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES)  # noqa: SIM115
    try:
        async for chunk in chunks:
            size += len(chunk)
            if size > max_bytes:
                raise PayloadTooLargeError(f"blob is larger than the limit of {max_bytes} bytes")
            hasher.update(chunk)
            spool.write(chunk)
        actual = hasher.hexdigest()
        if actual != expected_sha256:
            raise DigestMismatchError(
                {
                    "message": "uploaded bytes do not match the digest in the URL",
                    "expected": expected_sha256,
                    "actual": actual,
                }
            )
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return spool


def put_blob(*, store: BlobStore, source: IO[bytes], digest: str) -> Blob:
    """Store verified bytes under ``digest``; ``created`` is False when it already existed."""
    check_digest(digest)
    if store.exists(digest):
        return Blob(digest=digest, size=store.size(digest), created=False)
    try:
        stored = store.put(source, expected_sha256=digest)
    except StorageDigestMismatch as exc:
        raise DigestMismatchError(
            {"message": str(exc), "expected": exc.expected, "actual": exc.actual}
        ) from exc
    return Blob(digest=stored, size=store.size(stored), created=True)


def blob_size(*, store: BlobStore, digest: str) -> int:
    check_digest(digest)
    try:
        return store.size(digest)
    except BlobNotFoundError as exc:
        raise NotFoundError(f"blob {digest} not found") from exc


def require_blob(*, store: BlobStore, digest: str, what: str) -> None:
    """``NotFoundError`` naming ``what`` unless the blob is stored."""
    check_digest(digest)
    if not store.exists(digest):
        raise NotFoundError(f"{what}: blob {digest} not found; upload it first")


def presigned_url(
    *, store: BlobStore, digest: str, size: int, threshold: int, expires: int
) -> str | None:
    """A presigned URL for large blobs on stores that offer them (S3), else None."""
    if size < threshold:
        return None
    return store.presigned_url(digest, expires=expires)


def iter_blob(
    *,
    store: BlobStore,
    digest: str,
    on_corrupt: Callable[[DigestMismatchError], None] | None = None,
) -> Iterator[bytes]:
    """Stream a blob's bytes, hashed once as they are read, holding the last piece back
    until the digest is checked: a corrupted blob is never sent whole.

    On a mismatch `on_corrupt` gets the ``DigestMismatchError`` (to audit it), which is
    then raised: the response breaks off short of its ``Content-Length``, so a client sees
    an incomplete transfer, whatever it checks.
    """
    try:
        with store.open(digest) as fh:
            held = fh.read(READ_CHUNK)
            while held:
                following = fh.read(READ_CHUNK)  # the read that reaches EOF checks the digest
                yield held
                held = following
    except StorageDigestMismatch as exc:
        error = _corrupted(digest, exc)
        logger.error("blob %s is corrupted (hashes to %s): transfer broken off", digest, exc.actual)
        if on_corrupt is not None:
            on_corrupt(error)
        raise error from exc


def read_verified(
    *, store: BlobStore, digest: str, keep_below: int = SERVE_FROM_MEMORY
) -> bytes | None:
    """A blob smaller than ``keep_below``, read once and verified before a byte is sent;
    None for a larger one, which `iter_blob` verifies as it streams (nothing is read here).

    ``DigestMismatchError`` (with ``expected`` and ``actual``) when the stored bytes no
    longer hash to their digest; ``NotFoundError`` when the blob is gone.
    """
    check_digest(digest)
    try:
        if store.size(digest) >= keep_below:
            return None
        with store.open(digest) as fh:
            return fh.read()
    except StorageDigestMismatch as exc:
        raise _corrupted(digest, exc) from exc
    except BlobNotFoundError as exc:
        raise NotFoundError(f"blob {digest} not found") from exc


def _corrupted(digest: str, exc: StorageDigestMismatch) -> DigestMismatchError:
    return DigestMismatchError(
        {
            "message": f"stored blob {digest} is corrupted: its bytes hash differently",
            "expected": exc.expected,
            "actual": exc.actual,
        }
    )


def record_corruption(
    *, session: Session, actor: Principal, digest: str, error: DigestMismatchError
) -> None:
    """The audit event of a stored blob found corrupted while it was being served."""
    detail = error.detail if isinstance(error.detail, dict) else {}
    append_event(
        session,
        actor=actor.name,
        action="blob.corrupt",
        subject=f"blob:{digest}",
        payload={"expected": digest, "actual": detail.get("actual")},
    )


def claim_blob(*, session: Session, store: BlobStore, digest: str, source: IO[bytes]) -> None:
    """After a PUT: renew the blob's lease, under the gc lock, and make sure it is stored.

    A PUT of a blob that already existed writes nothing; if ``weact gc`` deleted that blob
    between the check and now, it is stored again from ``source`` (the verified upload).
    """
    guard_blobs(session)
    record_put(session=session, digest=digest)
    if not store.exists(digest):
        source.seek(0)
        put_blob(store=store, source=source, digest=digest)


def record_put(*, session: Session, digest: str) -> None:
    """Renew the blob's lease: ``weact gc`` spares it for its grace period from now."""
    check_digest(digest)

    def upsert() -> None:
        lease = session.get(SqlBlobLease, digest, populate_existing=True)
        if lease is None:
            session.add(SqlBlobLease(digest=digest))
        else:
            lease.put_at = utcnow()
        session.flush()

    with_retries(session, upsert)
