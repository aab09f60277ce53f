"""Server-side commands: `weact serve`, `weact db upgrade` (and the helpers of `tokens.py`).

They talk to the database directly (`--database-url`/`WEACT_DATABASE_URL`, default the
SQLite file under `./.weact/`) and import the server lazily, so the client commands stay
light. A database that cannot be reached or read is one line too.
"""

from __future__ import annotations

import errno
import functools
import json
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from clikit.errors import CommandError
from registry.cli.base import fail_cleanly

F = TypeVar("F", bound=Callable[..., Any])

ROLES = ("reader", "publisher", "approver", "evaluator", "node", "admin")


def database_option(fn: F) -> F:
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


def settings_of(**overrides: str | None) -> Any:
    from registry.settings import Settings

    given: dict[str, Any] = {key: value for key, value in overrides.items() if value}
    return Settings(**given)


def check_port(host: str, port: int) -> None:
    """`CommandError` (one line, exit 1) when `host:port` cannot be listened on."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
            probe.bind((host, port))
    except OSError as exc:
        busy = exc.errno == errno.EADDRINUSE
        why = "the port is in use (another `weact serve`?)" if busy else exc.strerror
        raise CommandError(
            f"cannot serve on {host}:{port}: {why}; choose another with --port"
        ) from None


@click.command()
@database_option
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
@click.option(
    "--root",
    "trust_root",
    envvar="WEACT_TRUST_ROOT",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="The offline root of trust (root.json from `weact root`), served to nodes and, "
    "with --strict, enforced. Without it a development root is made under WEACT_TRUST_DIR "
    "(default ./.weact/trust) on first start.",
)
@click.option(
    "--timestamp-key",
    "timestamp_key",
    envvar="WEACT_TIMESTAMP_KEY",
    default=None,
    type=click.Path(dir_okay=False),
    help="The online key that signs channel timestamps (created when absent; default "
    "timestamp.key beside the blob directory). Add its .pub.json to the root: "
    "`weact root add-key root.json timestamp timestamp.pub.json`.",
)
@click.option(
    "--strict/--no-strict",
    envvar="WEACT_STRICT",
    default=False,
    help="Refuse pushes and approvals without a signature that meets the root (WEACT_STRICT=1).",
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
    trust_root: str | None,
    timestamp_key: str | None,
    strict: bool,
) -> None:
    """Check the blob store, migrate the database to head, then serve the registry API.

    A store that cannot be used (an S3 bucket that does not exist, credentials that do not
    work, a directory that is not writable) is one line on stderr and exit 1, before
    anything else happens.

    \b
    Slow clients: a request's line and headers must arrive within WEACT_HEADER_TIMEOUT_S
    (default 10 s) of its first byte, and its body may pause for WEACT_BODY_TIMEOUT_S
    (default 30 s) at most between two pieces; otherwise the answer is 408 and the
    connection is closed. Idle keep-alive connections close after 75 s.
    Other settings: WEACT_METRICS_PUBLIC=true serves /v1/metrics without a token;
    WEACT_DATABASE_LOCK_TIMEOUT_S (default 30) bounds a write's wait for a database lock
    (then 503 with Retry-After); WEACT_ADAPTER_MAX_HEADER_BYTES (1 MiB),
    WEACT_ADAPTER_MAX_TENSORS, WEACT_ADAPTER_MAX_DIMS and WEACT_ADAPTER_MAX_ELEMENTS bound an
    adapter's safetensors header. Signed trust: --root/WEACT_TRUST_ROOT, --strict/WEACT_STRICT;
    without a root, development keys and root are made under WEACT_TRUST_DIR (default
    ./.weact/trust) on first start (docs/trust.md).
    """
    from registry.api.app import open_blob_store
    from registry.api.serving import default_workers, serve_registry, serve_workers
    from registry.app import APP_FACTORY, create_app, prepare
    from registry.trust import TrustRoot
    from storage import check_store

    check_port(host, port)  # first: a busy port is one line, and nothing is created
    settings = settings_of(
        database_url=database_url,
        store_url=store_url,
        s3_endpoint_url=s3_endpoint_url,
        trust_root=trust_root,
        timestamp_key=timestamp_key,
    )
    settings.strict = strict
    check_store(open_blob_store(settings))  # before logging: a failure is one line
    if settings.trust_root:
        TrustRoot.load(Path(settings.trust_root))  # before logging: a bad root is one line
    logging.basicConfig(level=log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    line = prepare(settings)
    logging.getLogger("registry.trust").warning("%s", line)
    workers = workers or default_workers(settings.database_url)
    if workers == 1:
        serve_registry(create_app(settings), host=host, port=port, log_level=log_level)
        return
    # Each worker builds its app from the environment: hand it what the options said.
    os.environ["WEACT_DATABASE_URL"] = settings.database_url
    os.environ["WEACT_STORE_URL"] = settings.store_url
    if settings.s3_endpoint_url:
        os.environ["WEACT_S3_ENDPOINT_URL"] = settings.s3_endpoint_url
    if settings.trust_root:
        os.environ["WEACT_TRUST_ROOT"] = settings.trust_root
    os.environ["WEACT_STRICT"] = "1" if strict else "0"
    os.environ["WEACT_TIMESTAMP_KEY"] = settings.timestamp_key
    serve_workers(workers, APP_FACTORY, host=host, port=port, log_level=log_level)


@click.group()
def db() -> None:
    """Database migrations."""


@db.command("upgrade")
@database_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@fail_cleanly()
@database_errors
def db_upgrade(database_url: str | None, as_json: bool) -> None:
    """Migrate the database to the latest schema."""
    from sqlalchemy.engine import make_url

    from registry.db.migrate import upgrade

    url = settings_of(database_url=database_url).database_url
    upgrade(url)
    shown = make_url(url).render_as_string(hide_password=True)
    if as_json:
        click.echo(json.dumps({"database": shown, "at_head": True}, indent=2))
    else:
        click.echo(f"database at head: {shown}", err=True)


def _has_schema(database_url: str) -> bool:
    from sqlalchemy import inspect

    from registry.db.session import make_engine

    engine = make_engine(database_url)
    try:
        return inspect(engine).has_table("alembic_version")
    finally:
        engine.dispose()


def ensure_schema(database_url: str) -> None:
    """Migrate a database that has no schema yet (a fresh `./.weact/`); else leave it."""
    if not _has_schema(database_url):
        from registry.db.migrate import upgrade

        upgrade(database_url)


def require_schema(database_url: str) -> None:
    """A database with the registry's schema, or `CommandError`; creates nothing."""
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    shown = url.render_as_string(hide_password=True)
    missing_file = url.get_backend_name() == "sqlite" and not (
        url.database and Path(url.database).is_file()
    )
    if missing_file or not _has_schema(database_url):
        raise CommandError(f"no registry database at {shown} (give --database-url)")
