"""`weact token create|list|revoke|rebind`: through the running registry, or its database
directly. (`rebind` gives a node id to another node token: `POST /v1/nodes/ID/rebind`.)

Where a token goes is never a surprise:

- `--database-url` (or `$WEACT_DATABASE_URL`) given: that database, directly;
- else a registry URL (`--registry`/`$WEACT_URL`) and a token (`--token`/`$WEACT_TOKEN`, an
  admin's) given: the running registry over HTTP (`/v1/tokens`), whatever database it uses;
- else the default database (SQLite under `./.weact/`).

Whenever a command goes to a database directly it says which one on stderr (and in the
`--json` answer as `database`), so a token minted into the wrong file is seen at once; over
HTTP it names the registry (`registry`). The first admin token has to be made in the
database: nothing can create one over HTTP before it exists. The last admin token cannot
be revoked, here or over HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from clikit.options import json_option, token_option
from clikit.output import Output
from clikit.tables import render_rows
from registry.cli.base import fail_cleanly
from registry.cli.server import (
    ROLES,
    database_errors,
    database_option,
    ensure_schema,
    require_schema,
    settings_of,
)
from registry.client.url_cli import registry_url_option

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Target:
    """Where a token command goes: a database URL, or a registry URL and token."""

    database_url: str | None = None
    registry_url: str | None = None
    token: str | None = None

    @property
    def shown(self) -> str:
        if self.database_url is not None:
            from sqlalchemy.engine import make_url

            return make_url(self.database_url).render_as_string(hide_password=True)
        return str(self.registry_url)

    def where(self) -> dict[str, str]:
        key = "database" if self.database_url is not None else "registry"
        return {key: self.shown}


def _target(database_url: str | None, url: str | None, token: str | None) -> Target:
    if database_url:
        return Target(database_url=database_url)
    if url and token:
        return Target(registry_url=url, token=token)
    default = settings_of().database_url
    if url:
        click.echo(
            f"Note: a registry is configured ({url}) but no admin token (--token, "
            f"$WEACT_TOKEN): using the database {Target(database_url=default).shown} directly",
            err=True,
        )
    return Target(database_url=default)


def _target_options(fn: F) -> F:
    """--database-url, --registry, --token, --json; the command gets `target=` and `as_json=`."""

    @database_option
    @registry_url_option(
        "url",
        help="Registry to ask (with an admin --token), unless --database-url is given.",
        configured_only=True,
    )
    @token_option(help="An admin's bearer token, for --registry.")
    @json_option
    @fail_cleanly()
    @database_errors
    def wrapper(database_url: str | None, url: str | None, token: str | None, **kw: Any) -> Any:
        return fn(target=_target(database_url, url, token), **kw)

    wrapper.__doc__ = fn.__doc__
    wrapper.__name__ = fn.__name__
    return wrapper  # type: ignore[return-value]


def _client(target: Target) -> Any:
    from registry.client import RegistryClient

    return RegistryClient(str(target.registry_url), target.token)


@click.group()
def token() -> None:
    """API tokens: through the registry (--registry and an admin --token), else the database."""


@token.command("create")
@click.option("--name", required=True, help="Principal name (one person, several tokens).")
@click.option("--role", required=True, type=click.Choice(ROLES))
@_target_options
def token_create(target: Target, name: str, role: str, as_json: bool) -> None:
    """Create a token; it is printed once and only its hash is stored."""
    if target.database_url is None:
        with _client(target) as client:
            made = client.create_token(name=name, role=role)
        created = {"id": made["id"], "name": made["name"], "role": made["role"]}
        created["token"] = made["token"]
    else:
        from registry.db.session import session_scope
        from registry.services.tokens import create_token

        ensure_schema(target.database_url)
        with session_scope(target.database_url) as session:
            info, secret = create_token(session=session, name=name, role=role)
        created = {"id": info.id, "name": info.name, "role": str(info.role), "token": secret}
    where = " in the database " if target.database_url is not None else " by the registry at "
    click.echo(f"token for {name} ({role}) stored{where}{target.shown}, shown once:", err=True)
    if as_json:
        click.echo(json.dumps({**created, **target.where()}, indent=2))
    else:
        click.echo(created["token"])


@token.command("list")
@_target_options
def token_list(target: Target, as_json: bool) -> None:
    """List the tokens that are not revoked: id, name, role, created (never a secret)."""
    if target.database_url is None:
        with _client(target) as client:
            rows = [
                {k: t[k] for k in ("id", "name", "role", "created_at")}
                for t in client.list_tokens()
            ]
    else:
        from registry.db.session import session_scope
        from registry.services.tokens import list_tokens

        require_schema(target.database_url)
        with session_scope(target.database_url, write=False) as session:
            infos = list_tokens(session=session)
        rows = [
            {
                "id": t.id,
                "name": t.name,
                "role": str(t.role),
                "created_at": t.created_at.isoformat(),
            }
            for t in infos
        ]
    title = f"tokens in {target.shown}"
    Output(as_json).show(
        rows, lambda r: render_rows(r, ("id", "name", "role", "created_at"), title)
    )


@token.command("revoke")
@click.argument("token_id", type=int)
@_target_options
def token_revoke(target: Target, token_id: int, as_json: bool) -> None:
    """Revoke token TOKEN_ID (see `weact token list`); refused from its next request on."""
    if target.database_url is None:
        with _client(target) as client:
            revoked = dict(client.revoke_token(token_id))
    else:
        from registry.db.session import session_scope
        from registry.services.tokens import revoke_token

        require_schema(target.database_url)
        with session_scope(target.database_url) as session:
            info = revoke_token(session=session, token_id=token_id)
        revoked = {"id": info.id, "name": info.name, "role": str(info.role)}
        revoked["created_at"] = info.created_at.isoformat()
    result = {"id": revoked["id"], "name": revoked["name"], "role": revoked["role"]}
    result["revoked"] = True
    Output(as_json).show(
        {**result, **target.where()},
        lambda r: f"revoked token {r['id']} ({r['name']}, {r['role']}) in {target.shown}",
    )


@token.command("rebind")
@click.argument("node_id")
@click.argument("token_id", type=int)
@_target_options
def token_rebind(target: Target, node_id: str, token_id: int, as_json: bool) -> None:
    """Make node token TOKEN_ID the owner of NODE_ID.

    A node id belongs to the first node token that claims it (bound when the token is
    created with a node id, or by its first heartbeat); a heartbeat for it with any other
    token is 403 until an admin runs this. The previous owner's token is revoked (a node
    token serves one node id). Through the registry (`POST /v1/nodes/NODE_ID/rebind`, an
    admin --token) or straight in the database (--database-url).
    """
    if target.database_url is None:
        with _client(target) as client:
            bound = dict(client.rebind_node(node_id, token_id))
    else:
        from registry.db.session import session_scope
        from registry.services.tokens import rebind_node

        require_schema(target.database_url)
        with session_scope(target.database_url) as session:
            info = rebind_node(session=session, node_id=node_id, token_id=token_id, actor="cli")
        bound = {"id": info.id, "name": info.name, "node_id": info.node_id}
    result = {"node_id": node_id, "token_id": bound["id"], "token_name": bound["name"]}
    Output(as_json).show(
        {**result, **target.where()},
        lambda r: (
            f"node {r['node_id']} now belongs to token {r['token_id']} "
            f"({r['token_name']}) in {target.shown}"
        ),
    )
