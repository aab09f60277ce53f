"""Blobs and adapter registration on the S3 store (moto's server over real HTTP)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import boto3
import httpx
import pytest
from harness import Harness, build_harness, make_world

THRESHOLD = 4096


@pytest.fixture
def s3_api(sqlite_template: Path, s3_store_url: str, tmp_path: Path) -> Iterator[Harness]:
    import shutil

    shutil.copyfile(sqlite_template, tmp_path / "registry.db")
    yield from build_harness(
        f"sqlite:///{tmp_path / 'registry.db'}",
        s3_store_url,
        tmp_path,
        presign_threshold_bytes=THRESHOLD,
        max_body_bytes=1024 * 1024,
    )


def _objects(api: Harness, s3_server: str) -> int:
    bucket = api.store.url.removeprefix("s3://").split("/")[0]
    listing = boto3.client("s3", endpoint_url=s3_server).list_objects_v2(Bucket=bucket)
    return int(listing.get("KeyCount", 0))


def test_small_blobs_stream_and_large_ones_redirect(s3_api: Harness, s3_server: str) -> None:
    api = s3_api
    small, large = b"s" * 100, bytes(range(256)) * 64
    for data in (small, large):
        digest = hashlib.sha256(data).hexdigest()
        assert api.request("PUT", f"/blobs/{digest}", "publisher", content=data).status_code == 201
    small_get = api.request("GET", f"/blobs/{hashlib.sha256(small).hexdigest()}", "reader")
    assert small_get.status_code == 200
    assert small_get.content == small
    redirect = api.request(
        "GET", f"/blobs/{hashlib.sha256(large).hexdigest()}", "reader", follow_redirects=False
    )
    assert redirect.status_code == 307
    assert redirect.headers["location"].startswith(s3_server)
    assert httpx.get(redirect.headers["location"]).content == large


def test_wrong_digest_stores_nothing_on_s3(s3_api: Harness, s3_server: str) -> None:
    api = s3_api
    before = _objects(api, s3_server)
    wrong = hashlib.sha256(b"b").hexdigest()
    api.fails(422, "digest_mismatch", "PUT", f"/blobs/{wrong}", "publisher", content=b"a" * 5000)
    assert _objects(api, s3_server) == before
    assert not api.store.exists(wrong)


def test_adapters_register_from_s3_blobs(s3_api: Harness) -> None:
    world = make_world(s3_api)
    adapter = world.approved("write")
    revision = world.promote({"write": adapter["id"]})["revision"]
    assert revision["library"]["write"]["manifest_root"] == adapter["manifest_root"]
