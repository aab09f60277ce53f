"""`weact audit events`: verify the hash chain of the event log (exit 1 if it is broken)."""

from __future__ import annotations

import click
from rich.console import Group

from clikit.errors import CommandError
from clikit.output import Output
from clikit.tables import fields, render_rows
from registry.cli.base import client_command
from registry.client import RegistryClient


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
        out.show(report, lambda r: fields(sorted(r.items())))
    else:
        events = client.list_events(after=after, limit=limit)
        columns = ("id", "actor", "action", "subject", "created_at")
        out.show(
            {"events": events, "verification": report},
            lambda r: Group(render_rows(r["events"], columns), fields(sorted(report.items()))),
        )
    if not report["ok"]:
        raise CommandError(f"event chain broken at {report['first_broken']}: {report['detail']}")
