"""`weact fsck` and `weact gc`: maintenance commands that open the database and the blob
store directly (like `weact serve`).

Exit status: 0 clean (fsck) or done (gc); 1 fsck found a problem; 2 the command could not
run (unreachable database, unmigrated schema: `UncheckedError`, as for `weact gate`) or a
usage error.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from clikit.errors import UncheckedError
from clikit.options import json_option

F = TypeVar("F", bound=Callable[..., Any])
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """``90s``, ``30m``, ``24h``, ``7d``, ``1w``, or plain seconds (``0``) -> seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text.lower())
    if match is None:
        raise click.BadParameter(f"{text!r} is not a duration such as 90s, 30m, 24h or 7d")
    return float(match.group(1)) * _UNITS[match.group(2)]


def _store_options(fn: F) -> F:
    options = (
        click.option("--database-url", envvar="WEACT_DATABASE_URL", default=None),
        click.option("--store", "store_url", envvar="WEACT_STORE_URL", default=None),
        click.option("--s3-endpoint-url", envvar="WEACT_S3_ENDPOINT_URL", default=None),
        json_option,
    )
    for option in reversed(options):
        fn = option(fn)
    return fn


def _could_not_run(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from sqlalchemy.exc import SQLAlchemyError

        from storage import StorageError

        try:
            return fn(*args, **kwargs)
        except (SQLAlchemyError, StorageError, OSError, RuntimeError, TypeError) as exc:
            cause = getattr(exc, "orig", None) or exc
            raise UncheckedError(" ".join(f"{type(cause).__name__}: {cause}".split())) from exc

    return wrapper  # type: ignore[return-value]


@contextmanager
def _opened(database_url: str | None, store_url: str | None, endpoint: str | None) -> Iterator[Any]:
    from registry.db.migrate import check_current
    from registry.db.session import Database
    from registry.settings import Settings
    from storage import open_store

    given: dict[str, Any] = {
        "database_url": database_url,
        "store_url": store_url,
        "s3_endpoint_url": endpoint,
    }
    settings = Settings(**{k: v for k, v in given.items() if v})
    database = Database(settings.database_url)
    try:
        check_current(database.engine)
        options = {"endpoint_url": settings.s3_endpoint_url} if settings.s3_endpoint_url else {}
        is_s3 = settings.store_url.startswith("s3://")
        yield database, open_store(settings.store_url, **(options if is_s3 else {}))
    finally:
        database.dispose()


@click.command()
@_store_options
@_could_not_run
def fsck(database_url: str | None, store_url: str | None, s3_endpoint_url: str | None,
         as_json: bool) -> None:  # fmt: skip
    """Check blobs, manifest roots, channel heads and the event chain; exit 1 on a finding."""
    from registry.services.fsck import fsck as run_fsck

    with _opened(database_url, store_url, s3_endpoint_url) as (database, store):
        with database.read() as session:
            report = run_fsck(session=session, store=store)
    if as_json:
        body = {"ok": report.ok, "checked": report.checked}
        click.echo(json.dumps(body | {"findings": [asdict(f) for f in report.findings]}, indent=2))
    else:
        _show_fsck(report)
    if not report.ok:
        raise SystemExit(1)


def _show_fsck(report: Any) -> None:
    console = Console()
    checked = ", ".join(f"{n} {what}" for what, n in report.checked.items())
    if report.ok:
        console.print(f"clean: checked {checked}")
        return
    table = Table("check", "subject", "problem", title=f"{len(report.findings)} findings")
    for finding in report.findings:
        table.add_row(finding.check, finding.subject, finding.detail)
    console.print(table)
    console.print(f"checked {checked}")


@click.command()
@click.option(
    "--grace",
    default="24h",
    show_default=True,
    help="Spare blobs and temp files written (or PUT again) within this period.",
)
@click.option("--dry-run", is_flag=True, help="List what would be deleted; delete nothing.")
@_store_options
@_could_not_run
def gc(grace: str, dry_run: bool, database_url: str | None, store_url: str | None,
       s3_endpoint_url: str | None, as_json: bool) -> None:  # fmt: skip
    """Delete unreferenced blobs and stale temp files older than the grace period."""
    from registry.services.gc import collect_garbage

    grace_s = parse_duration(grace)
    with _opened(database_url, store_url, s3_endpoint_url) as (database, store):
        report = collect_garbage(database=database, store=store, grace_s=grace_s, dry_run=dry_run)
    if as_json:
        click.echo(json.dumps(asdict(report), indent=2))
        return
    verb = "would delete" if dry_run else "deleted"
    click.echo(
        f"{verb} {len(report.blobs)} blobs ({report.blob_bytes} bytes) and "
        f"{len(report.temp)} temp files ({report.temp_bytes} bytes); kept "
        f"{report.kept_referenced} referenced and {report.kept_recent} recent blobs"
    )
