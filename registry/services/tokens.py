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

import hashlib

from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session

from registry.audit import append_event
from registry.auth import generate_token, hash_token
from registry.db.convert import to_token
from registry.db.models import SqlPrincipal, SqlToken, utcnow
from registry.domain import Principal, Role, TokenInfo
from registry.errors import (
    ConflictError,
    ForbiddenError,
    InvalidError,
    InvalidStateError,
    NotFoundError,
    RegistryError,
    UnauthorizedError,
)
from registry.names import check_node_id
from registry.principals import check_principal_name, principal_key, refuse_lookalike
from registry.services.retry import with_retries

SYSTEM_ACTOR = "system"
PRINCIPALS_LOCK_KEY = 0x57454150  # "WEAP": principal creation (look-alike check)
ADMINS_LOCK_KEY = 0x57454141  # "WEAA": admin revocations (the last admin stays)


def _lock(session: Session, key: int) -> None:
    """A transaction-scoped lock on PostgreSQL (SQLite's writers exclude each other)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


def principal_row(session: Session, name: str) -> SqlPrincipal:
    """The principal called ``name``, created if new (a concurrent twin is reused).

    A new name is checked (``registry.principals``) and refused when it compares equal to
    an existing principal's name without being it ("Alice" when "alice" exists).
    """
    row = session.scalar(select(SqlPrincipal).where(SqlPrincipal.name == name))
    if row is not None:
        return row
    check_principal_name(name)
    _lock(session, PRINCIPALS_LOCK_KEY)
    key = principal_key(name)
    for existing in session.scalars(select(SqlPrincipal.name)):
        if existing != name and principal_key(existing) == key:
            raise refuse_lookalike(name, existing)

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
    if not name.strip() or len(name) > 128:
        raise InvalidError("token name must be 1-128 characters")
    _check_node_binding(role, node_id)
    if node_id is not None:
        _check_unowned(session, node_id, token_id=None, error=ConflictError)
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
    if row.role == Role.ADMIN.value and row.revoked_at is None:
        _keep_an_admin(session, token_id)
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


def _keep_an_admin(session: Session, token_id: int) -> None:
    """``ConflictError`` when ``token_id`` is the last admin token that is not revoked."""
    _lock(session, ADMINS_LOCK_KEY)
    others = session.scalar(
        select(func.count())
        .select_from(SqlToken)
        .where(
            SqlToken.role == Role.ADMIN.value,
            SqlToken.revoked_at.is_(None),
            SqlToken.id != token_id,
        )
    )
    if not others:
        raise ConflictError(
            {
                "message": f"token {token_id} is the last admin token and cannot be revoked "
                "(rule: last_admin): create another admin token first",
                "rule": "last_admin",
            }
        )


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


def _node_lock_key(node_id: str) -> int:
    return int.from_bytes(
        hashlib.sha256(f"node:{node_id}".encode()).digest()[:8], "big", signed=True
    )


def _owner(session: Session, node_id: str) -> SqlToken | None:
    """The live (not revoked) token that owns ``node_id``, if one does."""
    return session.scalar(
        select(SqlToken)
        .where(SqlToken.node_id == node_id, SqlToken.revoked_at.is_(None))
        .order_by(SqlToken.id)
        .limit(1)
    )


def _check_unowned(
    session: Session,
    node_id: str,
    token_id: int | None,
    error: type[RegistryError] = ForbiddenError,
) -> None:
    """``error`` when a live token other than ``token_id`` owns ``node_id``."""
    _lock(session, _node_lock_key(node_id))
    owner = _owner(session, node_id)
    if owner is not None and owner.id != token_id:
        raise error(
            {
                "message": f"node {node_id!r} is owned by token {owner.id} ({owner.name}); "
                f"an admin can re-bind it: weact token rebind {node_id} TOKEN_ID",
                "node_id": node_id,
                "owner_token_id": owner.id,
            }
        )


def bind_node(*, session: Session, actor: Principal, node_id: str) -> None:
    """Refuse a node token reporting as a node other than its own; bind it on first use.

    A node id is owned by the first token that claims it (at creation or by its first
    heartbeat): another token's claim is 403 until an admin re-binds the id
    (``rebind_node``). The binding is one conditional update (``WHERE node_id IS NULL``)
    under a lock on the node id, so of racing first heartbeats exactly one binds.
    Tokens of other roles (admin) are not bound.
    """
    if actor.role is not Role.NODE or actor.token_id is None:
        return
    if actor.node_id is None:
        bound = session.scalar(select(SqlToken.node_id).where(SqlToken.id == actor.token_id))
        if bound is None:
            _check_unowned(session, node_id, actor.token_id)
        session.execute(
            update(SqlToken)
            .where(SqlToken.id == actor.token_id, SqlToken.node_id.is_(None))
            .values(node_id=node_id)
            .execution_options(synchronize_session=False)
        )
    bound = session.scalar(select(SqlToken.node_id).where(SqlToken.id == actor.token_id))
    if bound != node_id:
        raise ForbiddenError(f"this node token is bound to node {bound!r}, not {node_id!r}")


def rebind_node(*, session: Session, node_id: str, token_id: int, actor: str) -> TokenInfo:
    """Make node token ``token_id`` the owner of ``node_id`` (an admin's decision).

    The previous owner's token is revoked: a node token serves one node id, and left
    unbound it could claim another. ``token_id`` must be a live node token that is unbound
    or bound to ``node_id`` already.
    """
    check_node_id(node_id)
    _lock(session, _node_lock_key(node_id))
    row = session.get(SqlToken, token_id)
    if row is None or row.revoked_at is not None:
        raise NotFoundError(f"token {token_id} not found (or revoked)")
    if row.role != Role.NODE.value:
        raise ConflictError(f"token {token_id} is a {row.role} token; only node tokens are bound")
    if row.node_id not in (None, node_id):
        raise ConflictError(f"token {token_id} is bound to node {row.node_id!r} already")
    previous = _owner(session, node_id)
    if previous is not None and previous.id != token_id:
        previous.revoked_at = utcnow()
        session.flush()
    row.node_id = node_id
    session.flush()
    append_event(
        session,
        actor=actor,
        action="node.rebind",
        subject=f"node:{node_id}",
        payload={
            "token_id": token_id,
            "previous_token_id": previous.id if previous is not None else None,
        },
    )
    return to_token(row)
