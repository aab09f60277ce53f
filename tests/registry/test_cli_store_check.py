"""`weact serve` checks its blob store before anything else: an S3 bucket that does not
exist, credentials that do not work, a local directory that cannot be written are one line
on stderr and exit 1 (moto's standalone server over real HTTP), and nothing is migrated."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from registry.launcher import embedded_registry, free_port

WEACT = Path(sys.executable).with_name("weact")


def serve(tmp_path: Path, store: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("WEACT_")}
    argv = [str(WEACT), "serve", "--port", str(free_port()), "--store", store]
    argv += ["--database-url", f"sqlite:///{tmp_path / 'registry.db'}"]
    return subprocess.run(
        argv, env={**base, **env}, capture_output=True, text=True, timeout=60, cwd=tmp_path
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_a_missing_bucket_is_one_line_at_start(s3_server: str, tmp_path: Path) -> None:
    bucket = f"missing-{uuid.uuid4().hex[:8]}"
    done = serve(tmp_path, f"s3://{bucket}/blobs", WEACT_S3_ENDPOINT_URL=s3_server)
    assert one_line(done) == (
        f"Error: blob store s3://{bucket}/blobs: bucket '{bucket}' does not exist "
        "(create it, or fix the URL)"
    )
    assert not (tmp_path / "registry.db").exists()  # checked before migrating


def test_missing_credentials_are_one_line_at_start(
    s3_server: str, s3_client: Any, tmp_path: Path
) -> None:
    bucket = f"creds-{uuid.uuid4().hex[:8]}"
    s3_client.create_bucket(Bucket=bucket)
    nowhere = str(tmp_path / "none")
    env = {
        "WEACT_S3_ENDPOINT_URL": s3_server,
        "AWS_ACCESS_KEY_ID": "",
        "AWS_SECRET_ACCESS_KEY": "",
        "AWS_SHARED_CREDENTIALS_FILE": nowhere,
        "AWS_CONFIG_FILE": nowhere,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    line = one_line(serve(tmp_path, f"s3://{bucket}/blobs", **env))  # empty: not set
    assert line.startswith(f"Error: blob store s3://{bucket}/blobs: no S3 credentials"), line


def test_a_good_bucket_serves(s3_store_url: str, s3_server: str, tmp_path: Path) -> None:
    with embedded_registry(tmp_path, store_url=s3_store_url) as registry:
        assert registry.process.poll() is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_directory_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    blobs = tmp_path / "blobs"
    (blobs / ".tmp").mkdir(parents=True)
    (blobs / ".tmp").chmod(0o500)
    try:
        line = one_line(serve(tmp_path, str(blobs)))
    finally:
        (blobs / ".tmp").chmod(0o700)
    assert line.startswith(f"Error: blob store {blobs.as_uri()}: not writable"), line


def test_a_store_path_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    blobs = tmp_path / "blobs"
    blobs.write_text("not a directory")
    line = one_line(serve(tmp_path, str(blobs)))
    assert line.startswith(f"Error: blob store {blobs.as_uri()}: cannot create"), line
    assert line.endswith("Not a directory")
    assert not (tmp_path / "registry.db").exists()
