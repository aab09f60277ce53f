"""`weact nodes`: the fleet of runtime nodes, each against its channel's head.

    weact nodes [--channel prod] [--json]

One row per node: id, channel, the revision it serves (`rev`) and the channel's head, lag
(revisions behind), audit result, seconds since its last heartbeat (`beat`) and whether it is
stale (it says it cannot reach the registry, or it missed 2 heartbeats). It fits 100 columns
with node ids of up to 20 characters: the library digest is shortened there. Exit status 0;
`--json` prints the registry's `GET /v1/nodes` answer as is.
"""

from __future__ import annotations

from collections.abc import Sequence

import click
from rich import box
from rich.table import Table

from clikit.output import Output
from clikit.tables import full, table, text
from registry.cli.base import client_command
from registry.client import Node, RegistryClient


def render_nodes(nodes: Sequence[Node]) -> Table:
    """Fits 100 columns with node ids of up to 20 characters: the library digest shortens
    (whole when there is room), it never folds."""
    columns = ("node", "channel", "rev", "head", "lag", "audit", "beat", "stale", "library")
    made = table(*columns, title=f"{len(nodes)} node(s)")
    made.box = box.SIMPLE_HEAD  # no vertical rules: 10 columns more for the digest
    for column in ("rev", "head", "lag"):
        made.columns[columns.index(column)].justify = "right"
    made.columns[0].min_width = min(20, max((len(n["id"]) for n in nodes), default=4))
    for n in nodes:
        made.add_row(
            n["id"],
            n["channel"],
            text(n["revision"]),
            text(n["head"]),
            text(n["lag"]),
            "ok" if n["audit_ok"] else "[red]FAILED[/red]",
            f"{n['heartbeat_age_s']:.0f} s",
            "[yellow]stale[/yellow]" if n["stale"] else "no",
            full(n["library_digest"]),
        )
    return made


@click.command()
@click.option("--channel", default=None, help="Only the nodes following this channel.")
@client_command()
def nodes(client: RegistryClient, out: Output, channel: str | None) -> None:
    """List runtime nodes: revision served vs channel head, lag, audit, heartbeat, stale."""
    if channel is not None:
        client.channel_revisions(channel)  # a channel that does not exist: not_found, exit 1
    listed = [n for n in client.list_nodes() if channel is None or n["channel"] == channel]
    out.show(listed, render_nodes)
