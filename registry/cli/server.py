"""Server-side commands: `weact serve`, `weact db upgrade`, `weact token create|list`.

They talk to the database directly (`--database-url`/`WEACT_DATABASE_URL`, default the
SQLite file under `./.weact/`) and import the server lazily, so the client commands stay
light. A database that cannot be reached or read is one line too.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from registry.cli.errors import CommandError, fail_cleanly
from registry.cli.options import json_option
from registry.cli.output import Output
from registry.cli.tables import render_rows

F = TypeVar("F", bound=Callable[..., Any])

ROLES = ("reader", "publisher", "approver", "evaluator", "node", "admin")


def _database_option(fn: F) -> F:
    return click.option(
        "--database-url",
        envvar="WEACT_DATABASE_URL",
        default=None,
        help="SQLAlchemy URL (default: SQLite under ./.weact/).",
    )(fn)


def database_errors(fn: F) -> F:
    """A database that cannot be reached or read is one line on stderr, exit 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from sqlalchemy.exc import SQLAlchemyError

        try:
            return fn(*args, **kwargs)
        except SQLAlchemyError as exc:
            cause = getattr(exc, "orig", None) or exc
            raise CommandError(f"database error: {type(cause).__name__}: {cause}") from exc

    return wrapper  # type: ignore[return-value]


def _settings(**overrides: str | None) -> Any:
    from registry.settings import Settings

    given: dict[str, Any] = {key: value for key, value in overrides.items() if value}
    return Settings(**given)


@click.command()
@_database_option
@click.option(
    "--store",
    "store_url",
    envvar="WEACT_STORE_URL",
    default=None,
    help="Blob store: a directory or s3://bucket/prefix (default ./.weact/blobs).",
)
@click.option(
    "--s3-endpoint-url",
    envvar="WEACT_S3_ENDPOINT_URL",
    default=None,
    help="S3-compatible endpoint (MinIO, moto) for an s3:// store.",
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--log-level", default="info", show_default=True)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Server processes on the one port (default: the core count on PostgreSQL, 1 on "
    "SQLite, where more serve reads in parallel while writes stay one at a time).",
)
@fail_cleanly()
@database_errors
def serve(
    database_url: str | None,
    store_url: str | None,
    s3_endpoint_url: str | None,
    host: str,
    port: int,
    log_level: str,
    workers: int | None,
) -> None:
    """Migrate the database to head, then serve the registry API."""
    from registry.api.app import create_app
    from registry.api.serving import default_workers, serve_registry, serve_workers
    from registry.db.migrate import upgrade

    logging.basicConfig(level=log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    settings = _settings(
        database_url=database_url, store_url=store_url, s3_endpoint_url=s3_endpoint_url
    )
    upgrade(settings.database_url)
    workers = workers or default_workers(settings.database_url)
    if workers == 1:
        serve_registry(create_app(settings), host=host, port=port, log_level=log_level)
        return
    # Each worker builds its app from the environment: hand it what the options said.
    os.environ["WEACT_DATABASE_URL"] = settings.database_url
    os.environ["WEACT_STORE_URL"] = settings.store_url
    if settings.s3_endpoint_url:
        os.environ["WEACT_S3_ENDPOINT_URL"] = settings.s3_endpoint_url
    serve_workers(workers, host=host, port=port, log_level=log_level)


@click.group()
def db() -> None:
    """Database migrations."""


@db.command("upgrade")
@_database_option
@fail_cleanly()
@database_errors
def db_upgrade(database_url: str | None) -> None:
    """Migrate the database to the latest schema."""
    from registry.db.migrate import upgrade

    upgrade(_settings(database_url=database_url).database_url)
    click.echo("database at head", err=True)


def _has_schema(database_url: str) -> bool:
    from sqlalchemy import inspect

    from registry.db.session import make_engine

    engine = make_engine(database_url)
    try:
        return inspect(engine).has_table("alembic_version")
    finally:
        engine.dispose()


def _ensure_schema(database_url: str) -> None:
    """Migrate a database that has no schema yet (a fresh `./.weact/`); else leave it."""
    if not _has_schema(database_url):
        from registry.db.migrate import upgrade

        upgrade(database_url)


def _require_schema(database_url: str) -> None:
    """A database with the registry's schema, or `CommandError`; creates nothing."""
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    shown = url.render_as_string(hide_password=True)
    missing_file = url.get_backend_name() == "sqlite" and not (
        url.database and Path(url.database).is_file()
    )
    if missing_file or not _has_schema(database_url):
        raise CommandError(f"no registry database at {shown} (give --database-url)")


@click.group()
def token() -> None:
    """API tokens (in the database directly)."""


@token.command("create")
@click.option("--name", required=True, help="Principal name (one person, several tokens).")
@click.option("--role", required=True, type=click.Choice(ROLES))
@_database_option
@json_option
@fail_cleanly()
@database_errors
def token_create(name: str, role: str, database_url: str | None, as_json: bool) -> None:
    """Create a token; it is printed once and only its hash is stored."""
    from registry.db.session import session_scope
    from registry.services.tokens import create_token

    url = database_url or _settings().database_url
    _ensure_schema(url)
    with session_scope(url) as session:
        info, secret = create_token(session=session, name=name, role=role)
    created = {"id": info.id, "name": info.name, "role": str(info.role), "token": secret}
    if as_json:
        click.echo(json.dumps(created, indent=2))
    else:
        click.echo(f"token for {name} ({role}), shown once:", err=True)
        click.echo(secret)


@token.command("list")
@_database_option
@json_option
@fail_cleanly()
@database_errors
def token_list(database_url: str | None, as_json: bool) -> None:
    """List the tokens that are not revoked: id, name, role, created (never a secret)."""
    from sqlalchemy.engine import make_url

    from registry.db.session import session_scope
    from registry.services.tokens import list_tokens

    url = database_url or _settings().database_url
    _require_schema(url)
    with session_scope(url, write=False) as session:
        infos = list_tokens(session=session)
    rows = [
        {"id": t.id, "name": t.name, "role": str(t.role), "created_at": t.created_at.isoformat()}
        for t in infos
    ]
    title = f"tokens in {make_url(url).render_as_string(hide_password=True)}"
    Output(as_json).show(
        rows, lambda r: render_rows(r, ("id", "name", "role", "created_at"), title)
    )
