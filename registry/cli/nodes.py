"""`weact nodes`: the fleet of runtime nodes, each against its channel's head.

    weact nodes [--channel prod] [--json]

One row per node: id, channel, the revision it serves and the channel's head, lag (revisions
behind), audit result, seconds since its last heartbeat and whether it is stale (it says it
cannot reach the registry, or it stopped reporting). Exit status 0; `--json` prints the
registry's `GET /v1/nodes` answer as is.
"""

from __future__ import annotations

from collections.abc import Sequence

import click
from rich.table import Table

from clikit.output import Output
from clikit.tables import DIGESTS, full, text
from registry.cli.base import client_command
from registry.client import Node, RegistryClient


def render_nodes(nodes: Sequence[Node]) -> Table:
    table = Table(title=f"{len(nodes)} node(s)")
    columns = ("node", "channel", "serves", "head", "lag", "audit", "heartbeat", "stale", "library")
    for column in columns:
        table.add_column(
            column,
            justify="right" if column in ("serves", "head", "lag") else "left",
            overflow="fold" if column in DIGESTS else "ellipsis",
        )
    for n in nodes:
        table.add_row(
            n["id"],
            n["channel"],
            text(n["revision"]),
            text(n["head"]),
            text(n["lag"]),
            "ok" if n["audit_ok"] else "[red]FAILED[/red]",
            f"{n['heartbeat_age_s']:.0f} s ago",
            "[yellow]stale[/yellow]" if n["stale"] else "no",
            full(n["library_digest"]),
        )
    return table


@click.command()
@click.option("--channel", default=None, help="Only the nodes following this channel.")
@client_command()
def nodes(client: RegistryClient, out: Output, channel: str | None) -> None:
    """List runtime nodes: revision served vs channel head, lag, audit, heartbeat, stale."""
    if channel is not None:
        client.channel_revisions(channel)  # a channel that does not exist: not_found, exit 1
    listed = [n for n in client.list_nodes() if channel is None or n["channel"] == channel]
    out.show(listed, render_nodes)
