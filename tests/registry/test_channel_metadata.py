"""Signed channel revisions and timestamps, offline (registry.trust.channel): the threshold,
the removal-only rule, a served library that differs from the signed one, and timestamps
that expire, name another channel or are signed by a key the root does not name."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from securesystemslib.signer import Signer

from registry.errors import StaleMetadataError, UntrustedError
from registry.trust import TrustRoot, create_key, load_public_key, load_signer
from registry.trust.channel import (
    check_timestamp,
    make_timestamp,
    revision_metadata,
    sign_revision,
    verify_revision_metadata,
    verify_timestamp,
)

NAMES = ("admin", "ap1", "ap2", "ap3", "stamp", "other")


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, Signer]:
    for name in NAMES:
        create_key(tmp_path, name)
    return {name: load_signer(tmp_path / f"{name}.key") for name in NAMES}


@pytest.fixture
def root(keys: dict[str, Signer], tmp_path: Path) -> TrustRoot:
    trust = TrustRoot.create([keys["admin"].public_key], threshold=1)
    for name in ("ap1", "ap2", "ap3"):
        trust.add_key("approve:prod", load_public_key(tmp_path / f"{name}.pub.json"))
    trust.set_threshold("approve:prod", 2)
    trust.add_key("timestamp", keys["stamp"].public_key)
    trust.sign(keys["admin"])
    return trust


def revision(number: int = 3, **library: str) -> dict[str, Any]:
    library = library or {"plan": "a" * 64, "write": "b" * 64}
    return {
        "channel": "prod",
        "backbone": "f" * 64,
        "revision": number,
        "library": {
            capability: {
                "adapter_id": index + 1,
                "name": f"{capability}@1",
                "manifest_root": root,
                "files": {"adapter_config.json": "c" * 64},
            }
            for index, (capability, root) in enumerate(sorted(library.items()))
        },
        "order": sorted(library),
        "created_at": "2026-12-01T10:00:00.123456",
    }


def signed(rev: dict[str, Any], *signers: Signer) -> dict[str, Any]:
    return revision_metadata(rev, [sign_revision(rev, s) for s in signers])


def test_a_revision_counts_with_the_channel_threshold_of_approvers(
    root: TrustRoot, keys: dict[str, Signer]
) -> None:
    rev = revision()
    assert len(verify_revision_metadata(root, rev, signed(rev, keys["ap1"], keys["ap3"]))) == 2
    with pytest.raises(UntrustedError, match="1 of 2 approver signature"):
        verify_revision_metadata(root, rev, signed(rev, keys["ap1"], keys["other"]))
    with pytest.raises(UntrustedError, match="0 of 2"):
        verify_revision_metadata(root, rev, signed(rev))


def test_a_served_library_other_than_the_signed_one_is_refused(
    root: TrustRoot, keys: dict[str, Signer]
) -> None:
    rev = revision()
    metadata = signed(rev, keys["ap1"], keys["ap2"])
    swapped = revision(plan="a" * 64, write="e" * 64)
    with pytest.raises(UntrustedError, match="differs from the one served"):
        verify_revision_metadata(root, swapped, metadata)
    with pytest.raises(UntrustedError, match="differs"):
        verify_revision_metadata(root, revision(number=4), metadata)


def test_a_revision_that_only_removes_needs_one_approver(
    root: TrustRoot, keys: dict[str, Signer]
) -> None:
    previous = {"plan": "a" * 64, "write": "b" * 64}
    smaller = revision(4, plan="a" * 64)
    verify_revision_metadata(root, smaller, signed(smaller, keys["ap1"]), previous=previous)
    with pytest.raises(UntrustedError, match="1 of 2"):  # nothing verified before: threshold
        verify_revision_metadata(root, smaller, signed(smaller, keys["ap1"]))
    changed = revision(4, plan="d" * 64)  # fewer adapters, but one of them new
    with pytest.raises(UntrustedError, match="1 of 2"):
        verify_revision_metadata(root, changed, signed(changed, keys["ap1"]), previous=previous)


def test_timestamps_expire_and_name_their_channel_and_revision(
    root: TrustRoot, keys: dict[str, Signer]
) -> None:
    rev = revision()
    stamp = make_timestamp(rev, keys["stamp"], expires_s=60, version=1)
    check_timestamp(verify_timestamp(root, "prod", stamp), rev)
    with pytest.raises(UntrustedError, match="not the one the timestamp names"):
        check_timestamp(verify_timestamp(root, "prod", stamp), revision(number=4))
    with pytest.raises(UntrustedError, match="served for 'staging'"):
        verify_timestamp(root, "staging", stamp)
    later = datetime.now(UTC) + timedelta(seconds=120)
    with pytest.raises(StaleMetadataError, match="expired"):
        verify_timestamp(root, "prod", stamp, now=later)
    forged = make_timestamp(rev, keys["other"], expires_s=60, version=2)
    with pytest.raises(UntrustedError, match="0 of 1 signature"):
        verify_timestamp(root, "prod", forged)
