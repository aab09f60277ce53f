"""The root of trust a registry serves (registry.trust): its versions, its mode, rotation.

The registry keeps every version of the root it was started with or that admins published
since (`trust_roots`), serves them to nodes (`GET /v1/trust/root?version=N`) and, when
strict, checks pushes and approvals against the newest. It vouches for none of them: a node
accepts version N+1 only when the admin threshold of the version it trusts signed it
(runtime.root_updates), so a registry cannot hand it a root of its own.

- `install_root` (at `weact serve`): the root given with `--root`, else the chain already
  stored, else a development root made under the trust directory (registry.trust.development);
- `publish_root` (`POST /v1/trust/root`, `weact root publish`): the next version, refused
  unless signed as TUF's rotation requires;
- `trust_status`: the mode and the newest root, for `GET /v1/trust` and the web UI.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from registry.audit import append_event
from registry.db.models import SqlTrustRoot
from registry.db.session import Database
from registry.domain import Principal
from registry.errors import ConflictError, NotFoundError, UntrustedError
from registry.trust import TrustRoot
from registry.trust.development import development_root, is_development

logger = logging.getLogger(__name__)

STRICT, DEVELOPMENT = "strict", "development"
SYSTEM = "weact-serve"


def _root_of(row: SqlTrustRoot) -> TrustRoot:
    return TrustRoot.from_bytes(row.metadata_json.encode(), label=f"root version {row.version}")


def _newest(session: Session) -> SqlTrustRoot | None:
    return session.scalars(
        select(SqlTrustRoot).order_by(SqlTrustRoot.version.desc()).limit(1)
    ).first()


def current_root(session: Session) -> TrustRoot | None:
    """The newest root version this registry serves (None before `install_root`)."""
    row = _newest(session)
    return _root_of(row) if row is not None else None


def _store(session: Session, root: TrustRoot, actor: str) -> None:
    text = json.dumps(root.metadata.to_dict(), sort_keys=True)
    session.add(
        SqlTrustRoot(
            version=root.version,
            metadata_json=text,
            development=is_development(root),
            created_by=actor,
        )
    )
    session.flush()


def _adopt(session: Session, given: TrustRoot) -> None:
    """Make `given` part of the stored chain: already there, the next version, or the start
    of a new chain in place of a development one."""
    rows = list(session.scalars(select(SqlTrustRoot).order_by(SqlTrustRoot.version)))
    same = next((r for r in rows if r.version == given.version), None)
    if same is not None and _root_of(same).metadata.signed_bytes == given.metadata.signed_bytes:
        return
    if rows and all(r.development for r in rows):
        session.execute(delete(SqlTrustRoot))  # leaving development: a new chain starts
    elif rows:
        newest = _root_of(rows[-1])
        try:
            given.verify(newest)
        except UntrustedError as exc:
            raise ConflictError(
                f"root version {given.version} does not follow the registry's root version "
                f"{newest.version}: {exc} (publish each version in turn: weact root publish)"
            ) from exc
    _store(session, given, SYSTEM)


def install_root(
    *, database: Database, given: TrustRoot | None, trust_dir: Path, strict: bool
) -> str:
    """Make the registry serve `given` (or its stored chain, or a development root made in
    `trust_dir`); the one log line that says which and in what mode."""
    made = False
    if given is None:
        with database.read() as session:
            stored = current_root(session)
        if stored is None:
            given, made = development_root(trust_dir)
    if given is not None:
        try:
            with database.write() as session:
                _adopt(session, given)
        except ConflictError:  # another process stored a version first: try again on it
            with database.write() as session:
                _adopt(session, given)
    with database.read() as session:
        root = current_root(session)
    assert root is not None
    return _mode_line(root, strict, made, trust_dir)


def _mode_line(root: TrustRoot, strict: bool, made: bool, trust_dir: Path) -> str:
    where = f"root version {root.version}"
    if is_development(root):
        verb = "generated" if made else "uses"
        where = (
            f"{verb} development keys and a permissive root (version {root.version}) "
            f"under {trust_dir}"
        )
    if strict:
        return f"strict trust: {where}; pushes and approvals must be signed as it requires"
    return (
        f"development trust: {where}; unsigned pushes and approvals are accepted "
        "(docs/trust.md: from development to strict)"
    )


def enforced_root(*, database: Database, strict: bool) -> TrustRoot | None:
    """The root a strict registry checks pushes and approvals against (None: not strict)."""
    if not strict:
        return None
    with database.read() as session:
        root = current_root(session)
    if root is None:
        raise UntrustedError("strict mode needs a root of trust (weact serve --root)")
    return root


def root_metadata(*, session: Session, version: int | None) -> str:
    """Version `version` of the root (the newest without one), as its admins signed it."""
    query = select(SqlTrustRoot)
    if version is None:
        query = query.order_by(SqlTrustRoot.version.desc()).limit(1)
    else:
        query = query.filter_by(version=version)
    row = session.scalars(query).first()
    if row is None:
        raise NotFoundError(f"no root version {version}" if version else "no root yet")
    return row.metadata_json


def publish_root(*, session: Session, actor: Principal, metadata: dict[str, Any]) -> dict[str, Any]:
    """Store the next root version: it must be signed by its own admin threshold and by the
    current version's (TUF rotation); anything else changes nothing."""
    new = TrustRoot.from_bytes(json.dumps(metadata).encode(), label="the published root")
    current = current_root(session)
    if current is None:
        raise ConflictError("this registry has no root yet to rotate from")
    new.verify(current)
    _store(session, new, actor.name)
    append_event(
        session,
        actor=actor.name,
        action="trust.root.published",
        subject=f"root:{new.version}",
        payload={"version": new.version, "previous": current.version},
    )
    return {"version": new.version, "previous": current.version, "root": new.summary()}


def trust_status(*, session: Session, strict: bool) -> dict[str, Any]:
    """The registry's mode and the newest root it serves (for nodes, the API and the UI)."""
    root = current_root(session)
    versions = list(session.scalars(select(SqlTrustRoot.version).order_by(SqlTrustRoot.version)))
    summary = None
    if root is not None:
        summary = {**root.summary(), "development": is_development(root)}
    return {
        "mode": STRICT if strict else DEVELOPMENT,
        "strict": strict,
        "root": summary,
        "versions": versions,
    }
