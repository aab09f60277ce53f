"""Signed channel revisions and timestamps on the registry side (registry.trust.channel).

The registry is not what makes a revision count: approvers sign its TUF targets metadata
with their own keys, the registry stores the signatures (`add_revision_signature`) and
serves the metadata with them (`revision_metadata`); nodes check against their root. It
also holds one online key, the root's `timestamp` role, that signs a short-lived
timestamp of each channel's current revision (`TimestampSigner`), renewed on request once
half its life has passed or the head changed.

    add_revision_signature(session=s, actor=p, channel="prod", revision=3, signature=sig,
                           root=None)
    revision_metadata(session=s, channel="prod", revision=3)
    timestamp_signer(settings).current(get_revision(session=s, channel="prod"))
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from pathlib import Path
from typing import Any

from securesystemslib.signer import Signature, Signer
from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.audit import append_event
from registry.auth import Permission, authorize
from registry.db.convert import to_revision as revision_of
from registry.db.models import SqlRevision, SqlRevisionSignature
from registry.domain import Principal, Revision
from registry.errors import ConflictError, InvalidError, NotFoundError, UntrustedError
from registry.services.revisions import channel_row
from registry.settings import Settings
from registry.trust import TrustRoot, create_key, load_signer
from registry.trust.channel import make_timestamp, parse_targets, revision_digest, revision_signers
from registry.trust.channel import revision_metadata as metadata_of

TIMESTAMP_KEY = "timestamp"


def _revision_row(session: Session, channel: str, revision: int) -> SqlRevision:
    found = channel_row(session, channel)
    row = None
    if found is not None:
        row = session.scalar(select(SqlRevision).filter_by(channel_id=found.id, revision=revision))
    if row is None:
        raise NotFoundError(f"channel {channel!r} has no revision {revision}")
    return row


def _fields(revision: Revision) -> dict[str, Any]:
    return dataclasses.asdict(revision)


def _signatures(session: Session, row: SqlRevision) -> list[dict[str, Any]]:
    rows = session.scalars(
        select(SqlRevisionSignature).filter_by(revision_id=row.id).order_by(SqlRevisionSignature.id)
    )
    return [dict(r.signature) for r in rows]


def revision_metadata(*, session: Session, channel: str, revision: int) -> dict[str, Any]:
    """The revision's TUF targets metadata with every signature stored for it."""
    row = _revision_row(session, channel, revision)
    return metadata_of(_fields(revision_of(row)), _signatures(session, row))


def add_revision_signature(
    *,
    session: Session,
    actor: Principal,
    channel: str,
    revision: int,
    signature: dict[str, Any],
    root: TrustRoot | None,
) -> dict[str, Any]:
    """Store an approver's signature of the revision; with `root` (strict), only one by a
    key of the channel's approve role that verifies."""
    authorize(actor, Permission.APPROVE)
    row = _revision_row(session, channel, revision)
    try:
        parsed = Signature.from_dict(dict(signature))
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidError(f"not a TUF signature ({{'keyid', 'sig'}}): {exc}") from exc
    if root is not None:
        metadata = parse_targets(metadata_of(_fields(revision_of(row)), [parsed.to_dict()]))
        if parsed.keyid not in revision_signers(root, channel, metadata):
            raise UntrustedError(
                f"the signature by {parsed.keyid} of {channel} revision {revision} is not a "
                "valid one by an approver of the channel"
            )
    exists = session.scalar(
        select(SqlRevisionSignature.id).filter_by(revision_id=row.id, keyid=parsed.keyid)
    )
    if exists is not None:
        raise ConflictError(
            f"{channel} revision {revision} already has a signature by {parsed.keyid}"
        )
    session.add(
        SqlRevisionSignature(
            revision_id=row.id,
            keyid=parsed.keyid,
            signature=parsed.to_dict(),
            created_by=actor.name,
        )
    )
    append_event(
        session,
        actor=actor.name,
        action="channel.revision.signed",
        subject=f"channel:{channel}",
        payload={"revision": revision, "keyid": parsed.keyid},
    )
    session.flush()
    return {"channel": channel, "revision": revision, "keyid": parsed.keyid}


class TimestampSigner:
    """Signs each channel's timestamp, renewed once half its life passed or the head moved."""

    def __init__(self, signer: Signer, expires_s: float) -> None:
        self.signer = signer
        self.expires_s = expires_s
        self._lock = threading.Lock()
        self._signed: dict[str, tuple[int, str, float, dict[str, Any]]] = {}

    def current(self, revision: Revision) -> dict[str, Any]:
        fields = _fields(revision)
        digest, now = revision_digest(fields), time.monotonic()
        with self._lock:
            cached = self._signed.get(revision.channel)
            if cached is not None and cached[:2] == (revision.revision, digest) and now < cached[2]:
                return cached[3]
            version = max(int(time.time()), (cached[3]["signed"]["version"] + 1) if cached else 1)
            data = make_timestamp(fields, self.signer, expires_s=self.expires_s, version=version)
            renew = now + self.expires_s / 2
            self._signed[revision.channel] = (revision.revision, digest, renew, data)
            return data


def timestamp_key_path(settings: Settings) -> Path:
    """The timestamp key file: the setting, else timestamp.key beside the blob directory."""
    if settings.timestamp_key:
        return Path(settings.timestamp_key)
    store = settings.store_url
    base = Path(".weact") if "://" in store else Path(store).parent
    return base / f"{TIMESTAMP_KEY}.key"


_CREATING = threading.Lock()


def ensure_timestamp_key(settings: Settings) -> Path:
    """The timestamp key file, created (with its .pub.json) when absent. `weact serve`
    calls this before its workers start, so only one process ever creates it."""
    path = timestamp_key_path(settings)
    with _CREATING:
        if not path.exists():
            create_key(path.parent, path.name.removesuffix(".key"))
    return path


def timestamp_signer(settings: Settings) -> TimestampSigner:
    return _timestamp_signer(str(ensure_timestamp_key(settings)), settings.timestamp_expiry_s)


@functools.lru_cache(maxsize=4)
def _timestamp_signer(path: str, expires_s: float) -> TimestampSigner:
    return TimestampSigner(load_signer(Path(path)), expires_s)
