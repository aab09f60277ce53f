"""Blobs in an S3 bucket (AWS, MinIO, moto), under `s3://bucket/prefix/ab/cd/abcd...`.

A put cannot know its key before the whole stream is hashed, so:
- a blob smaller than `multipart_threshold` is buffered in memory, hashed, checked and
  written with one PutObject straight to its final key;
- a larger one streams as a multipart upload to a temporary key `<prefix>/tmp/<uuid>`
  (aborted on any failure: no orphan parts), is checked once complete, then copied
  server-side to its final key and the temporary object deleted (also on failure). A
  bucket lifecycle rule on `<prefix>/tmp/` can sweep what a killed process leaves.
  Parts upload on a helper thread (storage.pipeline) while the caller's thread reads and
  cuts the next one and another hashes it; a failure anywhere joins the helpers first,
  then aborts the upload, so no part lands after the abort.
Integrity is ours: the digest is always computed here, never trusted from the server.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator
from typing import Any, BinaryIO
from urllib.parse import urlparse

from storage.base import BaseBlobStore, BlobSource, check_expected
from storage.digest import OverlappedSha256, check_sha256, is_sha256, iter_chunks
from storage.errors import BlobNotFoundError, StoreUnavailableError, UnknownStoreError
from storage.inventory import StoredBlob, TempEntry
from storage.pipeline import Chunk, Stage

MIB = 1024 * 1024
PART_DEPTH = 1
"""Parts queued for upload while one is in flight: memory stays at about
(PART_DEPTH + 2) * part_size, plus the chunk being read."""
_MISSING = {"404", "NoSuchKey", "NotFound"}


class S3BlobStore(BaseBlobStore):
    """A content-addressed blob prefix in an S3 bucket."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        client: Any = None,
        multipart_threshold: int = 16 * MIB,
        part_size: int = 16 * MIB,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint_url = endpoint_url
        self.multipart_threshold = multipart_threshold
        self.part_size = part_size
        self._client = client if client is not None else _make_client(endpoint_url, region_name)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> S3BlobStore:
        parsed = urlparse(url)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise UnknownStoreError(f"not an s3://bucket/prefix URL: {url!r}")
        return cls(parsed.netloc, parsed.path, **options)

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    def check(self) -> None:
        """The bucket exists and the credentials list and write it (a probe object under
        `<prefix>/tmp/` is written and deleted); else `StoreUnavailableError`, one line."""
        probe = self._join(f"tmp/check-{uuid.uuid4().hex}")
        step = "reach the bucket"
        try:
            self._client.head_bucket(Bucket=self.bucket)
            step = "list the bucket"
            self._client.list_objects_v2(Bucket=self.bucket, Prefix=self._join(""), MaxKeys=1)
            step = "write to the bucket"
            self._client.put_object(Bucket=self.bucket, Key=probe, Body=b"")
            self._client.delete_object(Bucket=self.bucket, Key=probe)
        except Exception as exc:  # noqa: BLE001 - botocore's errors have no common base
            raise StoreUnavailableError(self.url, _check_problem(self.bucket, step, exc)) from exc

    def key_of(self, digest: str) -> str:
        check_sha256(digest)
        return self._join(f"{digest[:2]}/{digest[2:4]}/{digest}")

    def exists(self, digest: str) -> bool:
        return self._head(digest) is not None

    def size(self, digest: str) -> int:
        head = self._head(digest)
        if head is None:
            raise BlobNotFoundError(digest, self.url)
        return int(head["ContentLength"])

    def delete(self, digest: str) -> None:
        if not self.exists(digest):
            raise BlobNotFoundError(digest, self.url)
        self._client.delete_object(Bucket=self.bucket, Key=self.key_of(digest))

    def presigned_url(self, digest: str, expires: int = 3600) -> str | None:
        params = {"Bucket": self.bucket, "Key": self.key_of(digest)}
        url: str = self._client.generate_presigned_url(
            "get_object", Params=params, ExpiresIn=expires
        )
        return url

    def _open_raw(self, digest: str) -> BinaryIO:
        try:
            response = self._client.get_object(Bucket=self.bucket, Key=self.key_of(digest))
        except self._client.exceptions.ClientError as exc:
            if _error_code(exc) in _MISSING:
                raise BlobNotFoundError(digest, self.url) from None
            raise
        body: BinaryIO = response["Body"]
        return body

    def _put_new(self, src: BlobSource, expected: str | None) -> str:
        chunks = iter_chunks(src)  # bytes: a part holds on to its chunks
        with OverlappedSha256() as hasher:
            head = bytearray()
            for chunk in chunks:
                hasher.update(chunk)
                head += chunk
                if len(head) >= self.multipart_threshold:
                    return self._put_multipart(head, chunks, hasher, expected)
            digest = hasher.hexdigest()
        check_expected(digest, expected)
        if not self.exists(digest):
            self._client.put_object(Bucket=self.bucket, Key=self.key_of(digest), Body=bytes(head))
        return digest

    def _put_multipart(
        self,
        head: bytearray,
        chunks: Iterator[bytes],
        hasher: OverlappedSha256,
        expected: str | None,
    ) -> str:
        tmp_key = self._join(f"tmp/{uuid.uuid4().hex}")
        try:
            self._upload_parts(tmp_key, _parts(head, chunks, hasher, self.part_size))
            digest = hasher.hexdigest()
            check_expected(digest, expected)
            if not self.exists(digest):
                source = {"Bucket": self.bucket, "Key": tmp_key}
                self._client.copy(source, self.bucket, self.key_of(digest))
        finally:
            self._client.delete_object(Bucket=self.bucket, Key=tmp_key)
        return digest

    def _upload_parts(self, key: str, parts: Iterator[bytes]) -> None:
        """Upload `parts` on a helper thread (at most PART_DEPTH queued) while this one
        reads and hashes the next; abort the upload on any failure, once nothing is in
        flight any more."""
        upload_id = self._client.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
        done: list[dict[str, Any]] = []

        def upload(part: Chunk) -> None:
            number = len(done) + 1
            response = self._client.upload_part(
                Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=part
            )
            done.append({"PartNumber": number, "ETag": response["ETag"]})

        try:
            with Stage(upload, depth=PART_DEPTH, name="s3-parts") as uploader:
                for part in parts:
                    uploader.submit(part)
                uploader.finish()
            self._client.complete_multipart_upload(
                Bucket=self.bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": done}
            )
        except BaseException:
            self._client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
            raise

    def _head(self, digest: str) -> dict[str, Any] | None:
        try:
            head: dict[str, Any] = self._client.head_object(
                Bucket=self.bucket, Key=self.key_of(digest)
            )
        except self._client.exceptions.ClientError as exc:
            if _error_code(exc) in _MISSING:
                return None
            raise
        return head

    def _join(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    # -- inventory (storage.inventory.InventoriedStore) ---------------------------------

    def iter_blobs(self) -> Iterator[StoredBlob]:
        """Every stored blob (keys `<prefix>/ab/cd/<digest>`; `tmp/` is skipped)."""
        for item in self._list(self._join("")):
            name = item["Key"].rsplit("/", 1)[-1]
            if is_sha256(name) and item["Key"] == self.key_of(name):
                yield StoredBlob(name, int(item["Size"]), item["LastModified"].timestamp())

    def iter_temp(self) -> Iterator[TempEntry]:
        """Temporary objects and unfinished multipart uploads under `<prefix>/tmp/`."""
        tmp = self._join("tmp/")
        for item in self._list(tmp):
            yield TempEntry(
                f"object:{item['Key']}", int(item["Size"]), item["LastModified"].timestamp()
            )
        pages = self._client.get_paginator("list_multipart_uploads")
        for page in pages.paginate(Bucket=self.bucket, Prefix=tmp):
            for upload in page.get("Uploads", []):
                name = f"upload:{upload['Key']}:{upload['UploadId']}"
                yield TempEntry(name, 0, upload["Initiated"].timestamp())

    def remove_temp(self, name: str) -> None:
        kind, _, rest = name.partition(":")
        key, _, upload_id = rest.rpartition(":") if kind == "upload" else (rest, "", "")
        if not key.startswith(self._join("tmp/")) or kind not in {"object", "upload"}:
            raise ValueError(f"not a temporary object of this store: {name!r}")
        if kind == "upload":
            self._client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
        else:
            self._client.delete_object(Bucket=self.bucket, Key=key)

    def _list(self, prefix: str) -> Iterator[dict[str, Any]]:
        pages = self._client.get_paginator("list_objects_v2")
        for page in pages.paginate(Bucket=self.bucket, Prefix=prefix):
            yield from page.get("Contents", [])


def _parts(
    buffer: bytearray, chunks: Iterator[bytes], hasher: OverlappedSha256, part_size: int
) -> Iterator[bytes]:
    """Cut `buffer` then the rest of `chunks` (hashed on the way) into part_size parts."""
    while True:
        while len(buffer) >= part_size:
            yield bytes(buffer[:part_size])
            del buffer[:part_size]
        chunk = next(chunks, None)
        if chunk is None:
            break
        hasher.update(chunk)
        buffer += chunk
    if buffer:
        yield bytes(buffer)


def _check_problem(bucket: str, step: str, exc: Exception) -> str:
    """One line for a failed `check`: the bucket is missing, access is denied, no
    credentials, or the endpoint cannot be reached."""
    code = _error_code(exc)
    if code in ("404", "NoSuchBucket", "NotFound"):
        return f"bucket {bucket!r} does not exist (create it, or fix the URL)"
    if code in ("403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
        return f"access denied: the credentials cannot {step} ({code})"
    name = type(exc).__name__
    if name in ("NoCredentialsError", "PartialCredentialsError"):
        return "no S3 credentials (set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile)"
    text = " ".join(str(exc).split())
    return f"cannot {step}: {name}: {text}"


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", {}) or {}
    return str(response.get("Error", {}).get("Code", ""))


@functools.cache
def _data_loader() -> Any:
    """botocore's data loader, shared by every store of the process: it caches the S3
    service model it parses, which is most of a client's making."""
    from botocore.loaders import create_loader

    return create_loader()


def _make_client(endpoint_url: str | None, region_name: str | None) -> Any:
    """A client of its own session (credentials and region are found anew for each store)
    reading the service model through the shared loader: 143 ms a client with a loader
    each, 19 ms shared."""
    try:
        import boto3
        import botocore.session
        from botocore.config import Config
    except ImportError as exc:  # pragma: no cover - boto3 is a base dependency
        raise UnknownStoreError("s3:// stores need boto3: pip install boto3") from exc
    session = botocore.session.get_session()
    session.register_component("data_loader", _data_loader())
    style = "path" if endpoint_url else "auto"
    config = Config(s3={"addressing_style": style}, retries={"mode": "standard"})
    return boto3.session.Session(botocore_session=session).client(
        "s3", endpoint_url=endpoint_url, region_name=region_name, config=config
    )
