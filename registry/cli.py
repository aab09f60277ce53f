"""`weact` commands of the registry (mounted lazily by cli/main.py).

Server commands (`serve`, `db upgrade`, `token create`) talk to the database directly and
import the server lazily. Every other command is an HTTP client of a running registry
(`--url`/`WEACT_URL`, `--token`/`WEACT_TOKEN`) built on `registry.client`: a rich table for
people, `--json` for scripts. A failure prints one line on stderr and exits non-zero.

Exit status: 0 done; 1 refused or failed (an error response, a failed gate, a broken event
chain); 2 a usage error, or for `weact gate` a check that could not run.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click
import httpx
from rich.console import Console, Group, RenderableType
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from registry import errors
from registry.client import (
    Adapter,
    GateReport,
    Lineage,
    ProgressCallback,
    RegistryClient,
    Revision,
)
from storage.errors import StorageError

DEFAULT_URL = "http://127.0.0.1:8000"
ROLES = ("reader", "publisher", "approver", "evaluator", "node", "admin")
STATES = ("candidate", "approved", "rejected", "revoked")

F = TypeVar("F", bound=Callable[..., Any])


class CommandError(click.ClickException):
    """A failure shown as one line on stderr (click prints `Error: <message>`), exit 1."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class UncheckedError(CommandError):
    """A check (`weact gate`) that could not run: exit 2, apart from a failed check's 1."""

    exit_code = 2


def _one_line(detail: Any, limit: int = 400) -> str:
    text = " ".join(_detail_text(detail).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _detail_text(detail: Any) -> str:
    """A server error's detail as text: a message, its problems, or validation errors."""
    if isinstance(detail, str):
        return detail
    if isinstance(detail, dict) and isinstance(detail.get("message"), str):
        problems = detail.get("problems")
        listed = "; ".join(map(str, problems)) if isinstance(problems, list) else ""
        return f"{detail['message']}: {listed}" if listed else detail["message"]
    if isinstance(detail, list) and all(isinstance(d, dict) and "msg" in d for d in detail):
        return "; ".join(f"{'.'.join(map(str, d.get('loc', ())))}: {d['msg']}" for d in detail)
    return json.dumps(detail, separators=(",", ":"))


def describe_error(exc: BaseException) -> str:
    """The one-line message of an error a command can run into."""
    if isinstance(exc, errors.GateFailedError) and isinstance(exc.detail, dict):
        failing = [c["benchmark"] for c in exc.detail.get("checks", []) if c["verdict"] != "pass"]
        return f"gate_failed: promotion refused by the gate ({', '.join(failing) or 'no checks'})"
    if isinstance(exc, errors.RegistryError):
        return f"{exc.code}: {_one_line(exc.detail)}"
    if isinstance(exc, httpx.HTTPError):
        where = f" ({exc.request.url})" if _has_request(exc) else ""
        return f"cannot reach the registry{where}: {exc or type(exc).__name__}"
    return _one_line(str(exc) or type(exc).__name__)


def _has_request(exc: httpx.HTTPError) -> bool:
    try:
        exc.request  # noqa: B018 - raises RuntimeError when the error carries no request
    except RuntimeError:
        return False
    return True


def fail_cleanly(error: type[CommandError] = CommandError) -> Callable[[F], F]:
    """Turn the errors a command can meet into `error`: one line on stderr, non-zero exit."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except (errors.RegistryError, httpx.HTTPError, StorageError, OSError) as exc:
                raise error(describe_error(exc)) from exc
            except json.JSONDecodeError as exc:
                raise error(f"invalid JSON: {exc}") from exc

        return wrapper  # type: ignore[return-value]

    return decorate


class Output:
    """Prints results: JSON on stdout with `--json`, rich renderables otherwise."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.console = Console()

    def show(self, data: Any, render: Callable[[Any], RenderableType]) -> None:
        if self.as_json:
            click.echo(json.dumps(data, indent=2, sort_keys=True))
        else:
            self.console.print(render(data))


def client_command(error: type[CommandError] = CommandError) -> Callable[[F], F]:
    """Add --url/--token/--json and call the command with `client=` and `out=`."""

    def decorate(fn: F) -> F:
        @click.option(
            "--url", envvar="WEACT_URL", default=DEFAULT_URL, show_default=True, help="Registry."
        )
        @click.option("--token", envvar="WEACT_TOKEN", default=None, help="Bearer token.")
        @click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
        @fail_cleanly(error)
        @functools.wraps(fn)
        def wrapper(url: str, token: str | None, as_json: bool, **kwargs: Any) -> Any:
            with RegistryClient(url, token) as client:
                return fn(client=client, out=Output(as_json), **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


@contextmanager
def transfer_progress(description: str) -> Iterator[ProgressCallback | None]:
    """A progress bar on stderr for a transfer, when stderr is a terminal."""
    console = Console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn())
    with Progress(*columns, TransferSpeedColumn(), console=console, transient=True) as progress:
        task = progress.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total or None)

        yield update


# -- rendering -------------------------------------------------------------------------


def _short(digest: str | None, n: int = 12) -> str:
    return digest[:n] if digest else "-"


def _text(value: Any) -> str:
    return "-" if value is None else str(value)


def _fields(pairs: Sequence[tuple[str, Any]]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    for key, value in pairs:
        grid.add_row(key, _text(value))
    return grid


def render_adapters(items: Sequence[Adapter], title: str | None = None) -> Table:
    table = Table(title=title)
    for column in ("id", "name", "label", "state", "rank", "parent", "manifest", "by"):
        table.add_column(column)
    for a in items:
        table.add_row(
            str(a["id"]),
            a["name"],
            _text(a["label"]),
            a["state"],
            str(a["rank"]),
            _text(a["parent_id"]),
            _short(a["manifest_root"]),
            a["created_by"],
        )
    return table


def render_adapter(a: Adapter) -> Table:
    return _fields(
        [
            ("id", a["id"]),
            ("name", a["name"]),
            ("label", a["label"]),
            ("state", a["state"]),
            ("backbone", a["backbone"]),
            ("parent", a["parent_id"]),
            ("rank / alpha", f"{a['rank']} / {a['alpha']}"),
            ("targets", ", ".join(a["target_modules"])),
            ("manifest", a["manifest_root"]),
            *((f"file {name}", digest) for name, digest in sorted(a["files"].items())),
            ("created", f"{a['created_by']} at {a['created_at']}"),
        ]
    )


def render_lineage(lineage: Lineage) -> Table:
    rows = [("ancestor", a) for a in lineage["ancestors"]]
    rows += [("this", lineage["adapter"])] + [("descendant", a) for a in lineage["descendants"]]
    table = Table(title=f"lineage of {lineage['adapter']['name']}")
    for column in ("relation", "id", "name", "label", "state", "parent", "manifest"):
        table.add_column(column)
    for relation, a in rows:
        table.add_row(
            relation,
            str(a["id"]),
            a["name"],
            _text(a["label"]),
            a["state"],
            _text(a["parent_id"]),
            _short(a["manifest_root"]),
        )
    return table


def render_revision(rev: Revision) -> Table:
    table = Table(
        title=f"{rev['channel']} r{rev['revision']}  library {_short(rev['library_digest'])}"
        f"  backbone {_short(rev['backbone'])}  order {','.join(rev['order']) or '-'}",
        caption=f"by {rev['created_by']} at {rev['created_at']}"
        + (f": {rev['reason']}" if rev["reason"] else ""),
    )
    for column in ("capability", "adapter", "id", "manifest"):
        table.add_column(column)
    for capability, entry in sorted(rev["library"].items()):
        table.add_row(capability, entry["name"], str(entry["adapter_id"]), entry["manifest_root"])
    return table


def render_revisions(revs: Sequence[Revision]) -> Table:
    table = Table()
    for column in ("channel", "revision", "library", "adapters", "order", "by", "reason"):
        table.add_column(column)
    for rev in revs:
        table.add_row(
            rev["channel"],
            str(rev["revision"]),
            _short(rev["library_digest"]),
            " ".join(entry["name"] for _, entry in sorted(rev["library"].items())),
            ",".join(rev["order"]) or "-",
            rev["created_by"],
            _text(rev["reason"]),
        )
    return table


def _interval(check: Mapping[str, Any]) -> str:
    if check.get("ci_low") is None:
        return "-"
    return f"[{check['ci_low']:+.4f}, {check['ci_high']:+.4f}]"


def _number(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else _text(value)


def render_gate(report: GateReport) -> Table:
    """One row per benchmark: baseline, candidate, delta and its interval, n, who evaluated."""
    table = Table(title=f"gate: {'passed' if report['passed'] else 'FAILED'}")
    columns = ("benchmark", "scope", "baseline", "candidate", "delta", "interval", "n", "tol")
    for column in (*columns, "verdict", "evaluated by"):
        table.add_column(column)
    for check in report["checks"]:
        who = {check.get("baseline_by"), check.get("candidate_by")} - {None}
        table.add_row(
            f"{check['benchmark']}@{check['version']}",
            check["scope"],
            *(_number(check[key]) for key in ("baseline", "candidate", "delta")),
            _interval(check),
            _text(check.get("n")),
            _text(check["tolerance"]),
            check["verdict"] + (f" ({check['detail']})" if check.get("detail") else ""),
            ", ".join(sorted(str(w) for w in who)) or "-",
        )
    return table


def render_rows(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> Table:
    table = Table()
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(_text(row.get(column)) for column in columns))
    return table


# -- server commands -------------------------------------------------------------------


def _database_option(fn: F) -> F:
    return click.option(
        "--database-url",
        envvar="WEACT_DATABASE_URL",
        default=None,
        help="SQLAlchemy URL (default: SQLite under ./.weact/).",
    )(fn)


def database_errors(fn: F) -> F:
    """Server commands: a database that cannot be reached or read is one line too."""

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
@fail_cleanly()
@database_errors
def serve(
    database_url: str | None,
    store_url: str | None,
    s3_endpoint_url: str | None,
    host: str,
    port: int,
    log_level: str,
) -> None:
    """Migrate the database to head, then serve the registry API."""
    import uvicorn

    from registry.api.app import create_app
    from registry.db.migrate import upgrade

    logging.basicConfig(level=log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    settings = _settings(
        database_url=database_url, store_url=store_url, s3_endpoint_url=s3_endpoint_url
    )
    upgrade(settings.database_url)
    uvicorn.run(create_app(settings), host=host, port=port, log_level=log_level)


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


def _ensure_schema(database_url: str) -> None:
    """Migrate a database that has no schema yet (a fresh `./.weact/`); else leave it."""
    from sqlalchemy import inspect

    from registry.db.session import make_engine

    engine = make_engine(database_url)
    try:
        migrated = inspect(engine).has_table("alembic_version")
    finally:
        engine.dispose()
    if not migrated:
        from registry.db.migrate import upgrade

        upgrade(database_url)


@click.group()
def token() -> None:
    """API tokens (created directly in the database)."""


@token.command("create")
@click.option("--name", required=True, help="Principal name (one person, several tokens).")
@click.option("--role", required=True, type=click.Choice(ROLES))
@_database_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
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


# -- backbones and capabilities --------------------------------------------------------


@click.group()
def backbone() -> None:
    """Register and show backbones."""


@backbone.command("register")
@click.argument("directory", type=click.Path(exists=True, path_type=Path))
@click.option("--name", required=True)
@client_command()
def backbone_register(client: RegistryClient, out: Output, directory: Path, name: str) -> None:
    """Register the backbone in DIRECTORY (its *.safetensors) by its manifest."""
    from storage.manifest import manifest_of_path

    manifest = manifest_of_path(directory)
    created = client.register_backbone(name=name, manifest=manifest.to_json())
    out.show(created, lambda b: _fields(sorted(b.items())))


@backbone.command("list")
@client_command()
def backbone_list(client: RegistryClient, out: Output) -> None:
    """List backbones."""
    columns = ("id", "name", "root", "tensor_count", "param_count", "created_at")
    out.show(client.list_backbones(), lambda rows: render_rows(rows, columns))


@backbone.command("show")
@click.argument("id_or_root")
@client_command()
def backbone_show(client: RegistryClient, out: Output, id_or_root: str) -> None:
    """Show a backbone by id or manifest root."""
    out.show(client.get_backbone(id_or_root), lambda b: _fields(sorted(b.items())))


@click.group()
def capability() -> None:
    """Create and list capabilities."""


@capability.command("create")
@click.argument("name")
@click.option("--description", required=True, help="Shown to the model in load_lora.")
@click.option("--order", type=int, default=None, help="Position in the hard order.")
@client_command()
def capability_create(
    client: RegistryClient, out: Output, name: str, description: str, order: int | None
) -> None:
    """Create a capability."""
    created = client.create_capability(name=name, description=description, order=order)
    out.show(created, lambda c: _fields(sorted(c.items())))


@capability.command("list")
@client_command()
def capability_list(client: RegistryClient, out: Output) -> None:
    """List capabilities."""
    rows = client.list_capabilities()
    out.show(rows, lambda r: render_rows(r, ("name", "order", "description")))


# -- adapters --------------------------------------------------------------------------


@click.group()
def adapter() -> None:
    """Push, pull, list and show adapter versions."""


@adapter.command("push")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--capability", required=True)
@click.option("--parent", "parent_id", type=int, default=None, help="Parent version id.")
@click.option("--label", default=None, help="A human label, e.g. write++.")
@click.option("--backbone", "backbone_root", default=None, help="Backbone manifest root.")
@click.option(
    "--provenance",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="JSON file with the training provenance.",
)
@client_command()
def adapter_push(
    client: RegistryClient,
    out: Output,
    directory: Path,
    capability: str,
    parent_id: int | None,
    label: str | None,
    backbone_root: str | None,
    provenance: Path | None,
) -> None:
    """Upload a PEFT adapter DIRECTORY and register it as a candidate version."""
    stated = json.loads(provenance.read_text()) if provenance else None
    with transfer_progress(f"push {directory.name}") as progress:
        created = client.push_adapter(
            directory,
            capability=capability,
            backbone=backbone_root,
            parent_id=parent_id,
            label=label,
            provenance=stated,
            progress=progress,
        )
    out.show(created, render_adapter)


@adapter.command("pull")
@click.argument("adapter_id", type=int)
@click.option("--to", "to_dir", required=True, type=click.Path(path_type=Path))
@client_command()
def adapter_pull(client: RegistryClient, out: Output, adapter_id: int, to_dir: Path) -> None:
    """Download a verified PEFT directory of an adapter version."""
    with transfer_progress(f"pull {adapter_id}") as progress:
        path = client.pull_adapter(adapter_id, to_dir, progress)
    out.show({"adapter_id": adapter_id, "path": str(path)}, lambda r: f"pulled to {r['path']}")


@adapter.command("list")
@click.option("--capability", default=None)
@click.option("--backbone", "backbone_root", default=None)
@click.option("--state", type=click.Choice(STATES), default=None)
@click.option("--limit", type=int, default=None)
@click.option("--offset", type=int, default=None)
@client_command()
def adapter_list(
    client: RegistryClient,
    out: Output,
    capability: str | None,
    backbone_root: str | None,
    state: Any,
    limit: int | None,
    offset: int | None,
) -> None:
    """List adapter versions."""
    page = client.list_adapters(
        capability=capability, backbone=backbone_root, state=state, limit=limit, offset=offset
    )
    out.show(page, lambda p: render_adapters(p["items"], f"{p['total']} adapter versions"))


@adapter.command("show")
@click.argument("adapter_id", type=int)
@client_command()
def adapter_show(client: RegistryClient, out: Output, adapter_id: int) -> None:
    """Show one adapter version."""
    out.show(client.get_adapter(adapter_id), render_adapter)


@adapter.command("lineage")
@click.argument("adapter_id", type=int)
@client_command()
def adapter_lineage(client: RegistryClient, out: Output, adapter_id: int) -> None:
    """Show an adapter version's ancestors and descendants."""
    out.show(client.lineage(adapter_id), render_lineage)


def _decision(verb: str, doc: str) -> click.Command:
    @click.command(verb, help=doc)
    @click.argument("adapter_id", type=int)
    @click.option("--reason", default=None)
    @client_command()
    def command(client: RegistryClient, out: Output, adapter_id: int, reason: str | None) -> None:
        decided = getattr(client, verb)(adapter_id, reason)
        out.show(decided, render_adapter)

    return command


approve = _decision("approve", "Approve a candidate (not by the principal who pushed it).")
reject = _decision("reject", "Reject a candidate adapter version.")
revoke = _decision("revoke", "Revoke an approved adapter version.")


# -- channels --------------------------------------------------------------------------


def parse_assignments(pairs: Sequence[str]) -> dict[str, int | None]:
    """`cap=ID` pairs into {cap: id}; `cap=` or `cap=none` removes the capability."""
    parsed: dict[str, int | None] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{pair!r}: expected CAPABILITY=ID", param_hint="--adapter")
        if value.strip().lower() in ("", "none", "null"):
            parsed[name] = None
        elif value.strip().isdigit():
            parsed[name] = int(value)
        else:
            raise click.BadParameter(f"{pair!r}: ID must be an integer", param_hint="--adapter")
    return parsed


def _parse_order(order: str | None) -> list[str] | None:
    return [name.strip() for name in order.split(",") if name.strip()] if order else None


def _promotion_options(fn: F) -> F:
    options = [
        click.argument("channel"),
        click.option("--adapter", "adapters", multiple=True, metavar="CAP=ID", help="Repeatable."),
        click.option("--order", default=None, help="Hard order, comma separated."),
        click.option("--backbone", "backbone_root", default=None, help="Backbone root."),
        click.option("--expected-revision", type=int, default=None),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _promotion(
    adapters: Sequence[str], order: str | None, backbone_root: str | None, **rest: Any
) -> dict[str, Any]:
    """The PromoteRequest fields of the promote and gate options (the server takes the
    backbone from the adapters when a new channel is named without one)."""
    return {
        "adapters": parse_assignments(adapters),
        "order": _parse_order(order),
        "backbone": backbone_root,
        **rest,
    }


@click.command()
@_promotion_options
@click.option("--reason", default=None, help="Why, stored on the revision.")
@client_command()
def promote(client: RegistryClient, out: Output, channel: str, **options: Any) -> None:
    """Promote adapters into CHANNEL as a new revision, if the gate passes."""
    request = _promotion(**options)
    try:
        result = client.promote(channel, **request)
    except errors.GateFailedError as exc:
        if isinstance(exc.detail, dict):
            out.show(exc.detail, render_gate)
        raise
    out.show(result, lambda r: render_revision(r["revision"]))


@click.command()
@_promotion_options
@client_command(UncheckedError)
def gate(client: RegistryClient, out: Output, channel: str, **options: Any) -> None:
    """Dry-run the gate for a promotion: exit 0 pass, 1 fail, 2 could not check."""
    report = client.gate(channel, **_promotion(**options))
    out.show(report, render_gate)
    if not report["passed"]:
        raise click.exceptions.Exit(1)


@click.command()
@click.argument("channel")
@click.option("--to", "to_revision", type=int, required=True, help="Revision to restore.")
@click.option("--expected-revision", type=int, default=None)
@click.option("--reason", default=None, help="Why, stored on the revision.")
@client_command()
def rollback(
    client: RegistryClient,
    out: Output,
    channel: str,
    to_revision: int,
    expected_revision: int | None,
    reason: str | None,
) -> None:
    """Append a revision to CHANNEL equal to an earlier one."""
    rev = client.rollback(
        channel, to_revision=to_revision, expected_revision=expected_revision, reason=reason
    )
    out.show(rev, render_revision)


@click.group()
def channel() -> None:
    """Show channels and their revisions."""


@channel.command("list")
@client_command()
def channel_list(client: RegistryClient, out: Output) -> None:
    """The current revision of every channel."""
    out.show(client.list_channels(), render_revisions)


@channel.command("show")
@click.argument("name")
@client_command()
def channel_show(client: RegistryClient, out: Output, name: str) -> None:
    """The current revision of a channel."""
    out.show(client.get_channel(name), render_revision)


@channel.command("revisions")
@click.argument("name")
@client_command()
def channel_revisions(client: RegistryClient, out: Output, name: str) -> None:
    """Every revision of a channel, oldest first."""
    out.show(client.channel_revisions(name), render_revisions)


@channel.command("wait")
@click.argument("name")
@click.option("--after", type=int, required=True, help="Return once the revision passes this.")
@click.option("--wait", "wait_s", type=float, default=30.0, show_default=True)
@client_command()
def channel_wait(client: RegistryClient, out: Output, name: str, after: int, wait_s: float) -> None:
    """Long-poll a channel; prints the new revision, or null when none came in time."""
    rev = client.wait_for_channel(name, after=after, wait=wait_s)
    out.show(rev, lambda r: render_revision(r) if r else f"no revision after {after}")


# -- audit -----------------------------------------------------------------------------


@click.group()
def audit() -> None:
    """Verify the audit trail."""


@audit.command("events")
@click.option("--list", "show_events", is_flag=True, help="Also list the events.")
@click.option("--after", type=int, default=None)
@click.option("--limit", type=int, default=None)
@client_command()
def audit_events(
    client: RegistryClient,
    out: Output,
    show_events: bool,
    after: int | None,
    limit: int | None,
) -> None:
    """Verify the hash chain of the event log (exit 1 if it is broken)."""
    report = client.verify_events()
    if not show_events:
        out.show(report, lambda r: _fields(sorted(r.items())))
    else:
        events = client.list_events(after=after, limit=limit)
        columns = ("id", "actor", "action", "subject", "created_at")
        out.show(
            {"events": events, "verification": report},
            lambda r: Group(render_rows(r["events"], columns), _fields(sorted(report.items()))),
        )
    if not report["ok"]:
        raise CommandError(f"event chain broken at {report['first_broken']}: {report['detail']}")
