"""Fixtures shared by every test package. Keep this file small and storage-generic.

The test-support package `support` (tests/support, on the path through pyproject's
`pythonpath`) adds its fixtures as a plugin; see `support/fixtures.py`.

- `s3_server` (session): moto's standalone S3 server on a free loopback port, reached over
  real HTTP through boto3; yields its endpoint URL. Dummy AWS credentials and region are set
  in the environment for the session, and moto's 5 MiB minimum multipart part size is
  lowered to 256 bytes so that tests can exercise multipart uploads with small blobs.
- `s3_client` (session): a boto3 S3 client for that server (create buckets, list objects).
- `s3_store_url`: a fresh, empty bucket on that server, as `s3://<bucket>/blobs`; sets
  `WEACT_S3_ENDPOINT_URL` so that a registry (its `Settings`, `weact serve` children) finds
  the server; `storage.open_store(url, endpoint_url=...)` is told it explicitly.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

pytest_plugins = ["support.fixtures"]

# pytest-xdist runs a worker per core or more: torch's default (one thread per core in every
# worker and in every child a test starts) oversubscribes the cores and its threads spin waiting
# for each other. Set before torch is imported; children inherit it. Measured on the torch-heavy
# tests, 2 workers on 2 cores: 67 -> 55 s wall, 108 -> 79 CPU-s (docs/benchmarks.md).
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    _cores = len(os.sched_getaffinity(0))
    _threads = max(1, _cores // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_threads))

# The machines running the suite are shared and noisy: hypothesis' per-example deadline
# (200 ms) would turn load into failures. Speed lives in bench/, not in unit tests.
settings.register_profile("weact", deadline=None)
settings.load_profile("weact")

AWS_TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    with pytest.MonkeyPatch.context() as mp:
        for name, value in AWS_TEST_ENV.items():
            mp.setenv(name, value)
        for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
            mp.delenv(name, raising=False)
        mp.setattr("moto.s3.models.S3_UPLOAD_PART_MIN_SIZE", 256)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        try:
            yield f"http://{host}:{port}"
        finally:
            server.stop()


@pytest.fixture(scope="session")
def s3_client(s3_server: str) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=s3_server)


@pytest.fixture
def s3_store_url(s3_server: str, s3_client: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    bucket = f"test-{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=bucket)
    monkeypatch.setenv("WEACT_S3_ENDPOINT_URL", s3_server)
    return f"s3://{bucket}/blobs"
