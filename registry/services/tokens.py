"""API tokens: create (shown once), list (never the secrets), authenticate a bearer token,
bind node tokens.

A token belongs to a principal (an identity). A token's ``name`` is a label; its
``principal`` (by default the same name) is created on first use and reused after, so one
person's publisher token ``alice`` and approver token ``alice-ci`` (principal ``alice``)
are one identity, and the self-approval rule compares that identity, never the label.
A node token is bound to one node id: the one given when it is created, or else the first
one it reports as (trust on first use). It can never report as another node.
"""

from __future__ import annotations

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from registry.audit import append_event
from registry.auth import generate_token, hash_token
from registry.db.convert import to_token
from registry.db.models import SqlPrincipal, SqlToken
from registry.domain import Principal, Role, TokenInfo
from registry.errors import (
    ForbiddenError,
    InvalidError,
    InvalidStateError,
    NotFoundError,
    UnauthorizedError,
)
from registry.names import check_node_id
from registry.services.retry import with_retries

SYSTEM_ACTOR = "system"


def principal_row(session: Session, name: str) -> SqlPrincipal:
    """The principal called ``name``, created if new (a concurrent twin is reused)."""

    def find_or_create() -> SqlPrincipal:
        row = session.scalar(select(SqlPrincipal).where(SqlPrincipal.name == name))
        if row is None:
            row = SqlPrincipal(name=name)
            session.add(row)
            session.flush()
        return row

    return with_retries(session, find_or_create)


def _check_node_binding(role: Role, node_id: str | None) -> None:
    if node_id is None:
        return
    if role is not Role.NODE:
        raise InvalidError(f"node_id binds node tokens only, not a {role.value} token")
    check_node_id(node_id)


def create_token(
    *,
    session: Session,
    name: str,
    role: Role | str,
    actor: str = SYSTEM_ACTOR,
    node_id: str | None = None,
    principal: str | None = None,
) -> tuple[TokenInfo, str]:
    """A new token ``name`` of ``principal`` (default: ``name``) with ``role``; returns its
    info and the secret (shown once)."""
    try:
        role = Role(role)
    except ValueError as exc:
        raise InvalidError(f"unknown role {role!r}; one of {[r.value for r in Role]}") from exc
    principal = name if principal is None else principal
    for what, value in (("token name", name), ("principal", principal)):
        if not value.strip() or len(value) > 128:
            raise InvalidError(f"{what} must be 1-128 characters")
    _check_node_binding(role, node_id)
    owner = principal_row(session, principal)
    secret = generate_token()
    row = SqlToken(
        name=name,
        principal_id=owner.id,
        role=role.value,
        token_hash=hash_token(secret),
        node_id=node_id,
    )
    session.add(row)
    session.flush()
    append_event(
        session,
        actor=actor,
        action="token.create",
        subject=f"token:{row.id}",
        payload={"name": name, "role": role.value, "principal": owner.name}
        | ({"node_id": node_id} if node_id is not None else {}),
    )
    return to_token(row), secret


def list_tokens(*, session: Session) -> list[TokenInfo]:
    """The tokens that are not revoked, oldest first (their hashes stay in the database)."""
    query = select(SqlToken).where(SqlToken.revoked_at.is_(None)).order_by(SqlToken.id)
    return [to_token(row) for row in session.scalars(query)]


def revoke_token(*, session: Session, token_id: int, actor: str = SYSTEM_ACTOR) -> TokenInfo:
    """Revoke a token (one conditional update: of two racing revokes one wins, the other
    is ``InvalidStateError``); it is refused from the next request on."""
    row = session.get(SqlToken, token_id)
    if row is None:
        raise NotFoundError(f"token {token_id} not found")
    done = session.execute(
        update(SqlToken)
        .where(SqlToken.id == token_id, SqlToken.revoked_at.is_(None))
        .values(revoked_at=func.now())
        .execution_options(synchronize_session=False)
    )
    if done.rowcount != 1:  # type: ignore[attr-defined]
        raise InvalidStateError(f"token {token_id} ({row.name}) is already revoked")
    append_event(
        session,
        actor=actor,
        action="token.revoke",
        subject=f"token:{token_id}",
        payload={"name": row.name, "role": row.role},
    )
    return to_token(row)


def authenticate(*, session: Session, token: str | None) -> Principal:
    """The principal behind a bearer token; ``UnauthorizedError`` if unknown or revoked."""
    if not token:
        raise UnauthorizedError("missing bearer token")
    found = session.execute(
        select(SqlToken, SqlPrincipal.name)
        .join(SqlPrincipal, SqlPrincipal.id == SqlToken.principal_id)
        .where(SqlToken.token_hash == hash_token(token))
    ).first()
    if found is None or found[0].revoked_at is not None:
        raise UnauthorizedError("invalid or revoked token")
    row, principal = found
    return Principal(
        name=principal,
        role=Role(row.role),
        token_id=row.id,
        principal_id=row.principal_id,
        node_id=row.node_id,
    )


def bind_node(*, session: Session, actor: Principal, node_id: str) -> None:
    """Refuse a node token reporting as a node other than its own; bind it on first use.

    The binding is one conditional update (``WHERE node_id IS NULL``), so of two first
    heartbeats racing with one token for two node ids exactly one binds; the other is 403.
    Tokens of other roles (admin) are not bound.
    """
    if actor.role is not Role.NODE or actor.token_id is None:
        return
    if actor.node_id is None:
        session.execute(
            update(SqlToken)
            .where(SqlToken.id == actor.token_id, SqlToken.node_id.is_(None))
            .values(node_id=node_id)
            .execution_options(synchronize_session=False)
        )
    bound = session.scalar(select(SqlToken.node_id).where(SqlToken.id == actor.token_id))
    if bound != node_id:
        raise ForbiddenError(f"this node token is bound to node {bound!r}, not {node_id!r}")
