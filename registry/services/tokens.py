"""API tokens: create (shown once), list (never the secrets), authenticate a bearer token."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.audit import append_event
from registry.auth import generate_token, hash_token
from registry.db.convert import to_token
from registry.db.models import SqlToken
from registry.domain import Principal, Role, TokenInfo
from registry.errors import InvalidError, UnauthorizedError

SYSTEM_ACTOR = "system"


def create_token(
    *, session: Session, name: str, role: Role | str, actor: str = SYSTEM_ACTOR
) -> tuple[TokenInfo, str]:
    """A new token for ``name`` with ``role``; returns its info and the secret (shown once)."""
    try:
        role = Role(role)
    except ValueError as exc:
        raise InvalidError(f"unknown role {role!r}; one of {[r.value for r in Role]}") from exc
    if not name.strip() or len(name) > 128:
        raise InvalidError("token name must be 1-128 characters")
    secret = generate_token()
    row = SqlToken(name=name, role=role.value, token_hash=hash_token(secret))
    session.add(row)
    session.flush()
    append_event(
        session,
        actor=actor,
        action="token.create",
        subject=f"token:{row.id}",
        payload={"name": name, "role": role.value},
    )
    return to_token(row), secret


def list_tokens(*, session: Session) -> list[TokenInfo]:
    """The tokens that are not revoked, oldest first (their hashes stay in the database)."""
    query = select(SqlToken).where(SqlToken.revoked_at.is_(None)).order_by(SqlToken.id)
    return [to_token(row) for row in session.scalars(query)]


def authenticate(*, session: Session, token: str | None) -> Principal:
    """The principal behind a bearer token; ``UnauthorizedError`` if unknown or revoked."""
    if not token:
        raise UnauthorizedError("missing bearer token")
    row = session.scalar(select(SqlToken).where(SqlToken.token_hash == hash_token(token)))
    if row is None or row.revoked_at is not None:
        raise UnauthorizedError("invalid or revoked token")
    return Principal(name=row.name, role=Role(row.role), token_id=row.id)
