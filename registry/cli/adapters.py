"""`weact adapter push|pull|list|show|lineage` and `weact approve|reject|revoke`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from registry.cli.options import client_command
from registry.cli.output import Output, transfer_progress
from registry.cli.tables import render_adapter, render_adapters, render_lineage
from registry.client import RegistryClient

STATES = ("candidate", "approved", "rejected", "revoked")


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
