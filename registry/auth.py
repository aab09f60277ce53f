"""Bearer tokens (random, stored as sha256) and what each role may do."""

from __future__ import annotations

import hashlib
import secrets
from enum import StrEnum

from registry.domain import Principal, Role
from registry.errors import ForbiddenError

TOKEN_PREFIX = "weact_"


class Permission(StrEnum):
    READ = "read"
    PUBLISH = "publish"  # PUT blobs, POST adapters
    EVALUATE = "evaluate"  # POST evaluations
    APPROVE = "approve"  # approve/reject/revoke, promote, rollback, POST benchmarks
    HEARTBEAT = "heartbeat"
    ADMIN = "admin"  # tokens, backbones, capabilities


ROLE_PERMISSIONS: dict[Role, frozenset[Permission]] = {
    Role.READER: frozenset({Permission.READ}),
    Role.PUBLISHER: frozenset({Permission.READ, Permission.PUBLISH, Permission.EVALUATE}),
    Role.APPROVER: frozenset({Permission.READ, Permission.APPROVE, Permission.EVALUATE}),
    Role.NODE: frozenset({Permission.READ, Permission.HEARTBEAT}),
    Role.EVALUATOR: frozenset({Permission.READ, Permission.EVALUATE}),
    Role.ADMIN: frozenset(Permission),
}


def generate_token() -> str:
    """A new high-entropy token (256 random bits); only its hash is stored."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def allows(role: Role, permission: Permission) -> bool:
    return permission in ROLE_PERMISSIONS[role]


def authorize(principal: Principal, permission: Permission) -> None:
    """Raise ``ForbiddenError`` unless the principal's role grants ``permission``."""
    if not allows(principal.role, permission):
        raise ForbiddenError(f"role {principal.role.value!r} may not {permission.value}")
