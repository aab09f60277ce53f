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


# What a request does, by the last fixed segment of its path (or the collection it posts to),
# so that a refusal names the action refused and not only the permission it needs.
ACTIONS = {
    "approve": "approve an adapter",
    "reject": "reject an adapter",
    "revoke": "revoke an adapter",
    "promote": "promote into a channel",
    "rollback": "roll back a channel",
    "gate": "check a channel's gate",
    "tags": "tag an adapter",
    "signatures": "sign an adapter",
    "adapters": "push an adapter",
    "blobs": "upload a blob",
    "benchmarks": "define a benchmark",
    "evaluations": "post an evaluation",
    "tokens": "manage tokens",
    "backbones": "register a backbone",
    "capabilities": "create a capability",
    "heartbeat": "send a node heartbeat",
}


def action_of(method: str, path: str) -> str:
    """`revoke an adapter` for `POST /v1/adapters/6/revoke`; `METHOD path` when unknown."""
    words = [w for w in path.strip("/").split("/") if w and not w[0].isdigit()]
    for word in reversed(words):
        if word in ACTIONS:
            return ACTIONS[word]
    return f"{method} {path}"


def authorize(principal: Principal, permission: Permission, action: str | None = None) -> None:
    """Raise ``ForbiddenError`` unless the principal's role grants ``permission``; the
    message names the action refused (``action``, else the permission) and the roles that
    may do it."""
    if not allows(principal.role, permission):
        roles = " or ".join(r.value for r in Role if allows(r, permission))
        raise ForbiddenError(
            f"role {principal.role.value!r} may not {action or permission.value}: "
            f"that needs the {roles} role"
        )
