"""`weact backbone register|list|show` and `weact capability create|list`."""

from __future__ import annotations

from pathlib import Path

import click

from clikit.output import Output
from clikit.tables import fields, render_rows
from registry.cli.base import client_command
from registry.client import RegistryClient


@click.group()
def backbone() -> None:
    """Register and show backbones."""


@backbone.command("register")
@click.argument("directory", type=click.Path(exists=True, path_type=Path))
@click.option("--name", required=True)
@client_command(mutation=True)
def backbone_register(client: RegistryClient, out: Output, directory: Path, name: str) -> None:
    """Register the backbone in DIRECTORY (its *.safetensors) by its manifest."""
    from storage.manifest import manifest_of_path

    manifest = manifest_of_path(directory)
    created = client.register_backbone(name=name, manifest=manifest.to_json())
    line = (
        f"registered backbone {created['name']} (id {created['id']}, root {created['root'][:12]}…)"
    )
    out.confirm(created, lambda b: line, lambda b: fields(sorted(b.items())))


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
    out.show(client.get_backbone(id_or_root), lambda b: fields(sorted(b.items())))


@click.group()
def capability() -> None:
    """Create and list capabilities."""


@capability.command("create")
@click.argument("name")
@click.option("--description", required=True, help="Shown to the model in load_lora.")
@click.option("--order", type=int, default=None, help="Position in the hard order.")
@client_command(mutation=True)
def capability_create(
    client: RegistryClient, out: Output, name: str, description: str, order: int | None
) -> None:
    """Create a capability."""
    created = client.create_capability(name=name, description=description, order=order)
    out.confirm(
        created, lambda c: f"created capability {c['name']}", lambda c: fields(sorted(c.items()))
    )


@capability.command("list")
@client_command()
def capability_list(client: RegistryClient, out: Output) -> None:
    """List capabilities."""
    rows = client.list_capabilities()
    out.show(rows, lambda r: render_rows(r, ("name", "order", "description")))
