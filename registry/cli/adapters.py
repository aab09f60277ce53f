"""`weact adapter push|pull|list|show|lineage|tag` and `weact approve|reject|revoke`.

A push carries the directory's README.md (model card) and training.json along; pushing
bytes that a version already has answers with that version (`"existing": true`, a note on
stderr), never a second one. A directory holding training.json (made by `weact train`) goes
through the replay check of `weact train --publish` (`registry.client.replay`) first.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from clikit.output import Output
from clikit.progress import transfer_progress
from registry import errors
from registry.cli.base import adapter_argument, check_adapter_name, client_command, signer_of
from registry.cli.render import (
    adapter_line,
    render_adapter,
    render_adapters,
    render_lineage,
    tags_line,
)
from registry.cli.trust import verify
from registry.client import RegistryClient
from registry.client.replay import refuse_replay
from registry.client.transfers import TRAINING_FILE, training_provenance

STATES = ("candidate", "approved", "rejected", "revoked")
F = TypeVar("F", bound=Callable[..., Any])


def parse_tags(ctx: click.Context, param: click.Parameter, values: Any) -> dict[str, str]:
    """`KEY=VALUE` options into {key: value} (a key once)."""
    tags: dict[str, str] = {}
    for value in values:
        key, sep, text = value.partition("=")
        if not sep or not key or not text:
            raise click.BadParameter(f"{value!r}: expected KEY=VALUE", ctx, param)
        if key in tags:
            raise click.BadParameter(f"tag {key!r} is given twice", ctx, param)
        tags[key] = text
    return tags


def _tag_option(*decls: str, help: str) -> Callable[[F], F]:
    return click.option(*decls, multiple=True, metavar="KEY=VALUE", callback=parse_tags, help=help)


@click.group()
def adapter() -> None:
    """Adapter versions: push, pull, approve, reject, revoke, tag, verify, show, list."""


@adapter.command("push")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--capability", required=True)
@click.option(
    "--parent",
    callback=check_adapter_name,
    default=None,
    metavar="ADAPTER",
    help="Parent version: write@2 (or an id, #6).",
)
@click.option("--label", default=None, help="A human label, e.g. write++.")
@click.option("--backbone", "backbone_root", default=None, help="Backbone manifest root.")
@click.option(
    "--provenance",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="JSON file with the training provenance.",
)
@_tag_option("--tag", "tags", help="A key=value tag (repeat).")
@click.option(
    "--key",
    "key_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="The publisher's private key: sign the version's identity (signed trust).",
)
@click.option(
    "--allow-replay",
    is_flag=True,
    help="A trained directory: push anyway, recording replay: true.",
)
@client_command(mutation=True)
def adapter_push(
    client: RegistryClient,
    out: Output,
    directory: Path,
    capability: str,
    parent: str | None,
    label: str | None,
    backbone_root: str | None,
    provenance: Path | None,
    tags: dict[str, str],
    key_file: Path | None,
    allow_replay: bool,
) -> None:
    """Upload a PEFT adapter DIRECTORY (with its README.md and training.json, if there) and
    register it as a candidate version; bytes already registered answer with that version.

    A directory made by `weact train` (it holds training.json) is checked for replay as
    `weact train --publish` checks it, and refused (exit 1) unless --allow-replay; its
    provenance (from training.json, or --provenance) records the check's `replay`. A
    directory without training.json is pushed as it is: no replay check, and no provenance
    but --provenance's."""
    stated = json.loads(provenance.read_text()) if provenance else None
    parent_id = client.resolve_adapter(parent, backbone_root) if parent else None
    stated = checked_provenance(
        client,
        directory,
        stated,
        capability=capability,
        parent_id=parent_id,
        allow_replay=allow_replay,
    )
    with transfer_progress(f"push {directory.name}") as progress:
        try:
            created = client.push_adapter(
                directory,
                capability=capability,
                backbone=backbone_root,
                parent_id=parent_id,
                label=label,
                provenance=stated,
                progress=progress,
                tags=tags,
                signer=signer_of(key_file),
            )
        except errors.ConflictError as exc:
            if not (isinstance(exc.detail, dict) and "adapter_id" in exc.detail):
                raise
            click.echo(f"Note: {exc.detail['message']}", err=True)
            existing = client.get_adapter(int(exc.detail["adapter_id"]))
            out.confirm({**existing, "existing": True}, adapter_line("exists:"), render_adapter)
            return
    out.confirm({**created, "existing": False}, adapter_line("pushed"), render_adapter)


def checked_provenance(
    client: RegistryClient,
    directory: Path,
    stated: Any,
    *,
    capability: str,
    parent_id: int | None,
    allow_replay: bool,
) -> Any:
    """The provenance to push: `stated` (--provenance) as it is for a directory without
    training.json; for a trained one, `stated` or what its training.json states, with the
    `replay` of `refuse_replay` (which raises `ReplayError` when replay is not allowed)."""
    training = read_training(directory)
    if training is None:
        return stated
    stated = trained(training, directory, capability) if stated is None else stated
    if not isinstance(stated, dict):
        raise click.UsageError("--provenance: not a JSON object")
    replay = refuse_replay(
        training,
        client=client,
        capability=capability,
        parent_id=parent_id,
        allow_replay=allow_replay,
    )
    return {**stated, "replay": replay}


def read_training(directory: Path) -> dict[str, Any] | None:
    """The directory's training.json (written by `weact train`), or None when it has none."""
    path = directory / TRAINING_FILE
    if not path.is_file():
        return None
    try:
        training = json.loads(path.read_text())
    except ValueError as exc:
        raise click.UsageError(f"{path}: not a training.json of `weact train` ({exc})") from None
    if not isinstance(training, dict):
        raise click.UsageError(f"{path}: not a training.json of `weact train` (not an object)")
    return training


def trained(training: dict[str, Any], directory: Path, capability: str) -> dict[str, Any]:
    """The provenance a training.json (from `weact train`) states."""
    try:
        return training_provenance(training, capability)
    except (ValueError, AttributeError, TypeError, KeyError) as exc:
        path = directory / TRAINING_FILE
        raise click.UsageError(f"{path}: not a training.json of `weact train` ({exc})") from None


@adapter.command("pull")
@adapter_argument()
@click.option("--to", "to_dir", required=True, type=click.Path(path_type=Path))
@click.option(
    "--allow-revoked", is_flag=True, help="Pull a revoked version anyway (with a warning)."
)
@client_command()
def adapter_pull(
    client: RegistryClient, out: Output, adapter: str, to_dir: Path, allow_revoked: bool
) -> None:
    """Download a verified PEFT directory of an ADAPTER version (write@2), with the
    signatures the registry has of it in signatures.json (for `weact verify`). A revoked
    version is refused unless --allow-revoked."""
    record = client.adapter_by_name(adapter)
    adapter_id = record["id"]
    if record["state"] == "revoked":
        why = f"{record['name']} is revoked by {record.get('decided_by')}" + (
            f": {record['reason']}" if record.get("reason") else ""
        )
        if not allow_revoked:
            raise errors.InvalidStateError(f"refusing to pull: {why}; --allow-revoked pulls it")
        click.echo(f"Warning: {why}", err=True)
    with transfer_progress(f"pull {adapter}") as progress:
        path = client.pull_adapter(adapter_id, to_dir, progress)
    envelopes = [s["envelope"] for s in client.list_signatures(adapter_id)]
    if envelopes:  # an unsigned version pulls as its PEFT files alone
        from registry.trust.offline import SIGNATURES_FILE

        (path / SIGNATURES_FILE).write_text(json.dumps(envelopes, indent=2) + "\n")
    pulled = {"adapter_id": adapter_id, "name": adapter, "path": str(path)}
    out.show(pulled, lambda r: f"pulled to {r['path']}")


@adapter.command("list")
@click.option("--capability", default=None)
@click.option("--backbone", "backbone_root", default=None)
@click.option("--state", type=click.Choice(STATES), default=None)
@click.option("--limit", type=int, default=None)
@click.option(
    "--offset", type=int, default=None, help="Skip this many (at most 10,000; deeper: --after)."
)
@click.option("--after", type=int, default=None, help="Only versions whose id is above this.")
@_tag_option("--tag", "tags", help="Only versions with this tag (repeat: all of them).")
@click.option("--label", default=None, help="Only versions with this label.")
@click.option("--parent", callback=check_adapter_name, metavar="ADAPTER", help="Only its children.")
@click.option("--text", default=None, help="Only versions whose model card holds this text.")
@click.option(
    "--sort",
    type=click.Choice(["oldest", "newest", "name", "state", "label"]),
    default=None,
    help="Order (default: oldest first).",
)
@client_command()
def adapter_list(
    client: RegistryClient,
    out: Output,
    capability: str | None,
    backbone_root: str | None,
    state: Any,
    limit: int | None,
    offset: int | None,
    after: int | None,
    tags: dict[str, str],
    label: str | None,
    parent: str | None,
    text: str | None,
    sort: str | None,
) -> None:
    """List and search adapter versions (capability, state, tags, label, parent, card)."""
    parent_id = client.resolve_adapter(parent, backbone_root) if parent else None
    page = client.list_adapters(
        capability=capability,
        backbone=backbone_root,
        state=state,
        limit=limit,
        offset=offset,
        after=after,
        tags=[f"{k}={v}" for k, v in tags.items()],
        label=label,
        parent_id=parent_id,
        text=text,
        sort=sort,
    )
    more = "" if page.get("total_exact", True) else "+"
    out.show(page, lambda p: render_adapters(p["items"], f"{p['total']}{more} adapter versions"))


@adapter.command("show")
@adapter_argument()
@client_command()
def adapter_show(client: RegistryClient, out: Output, adapter: str) -> None:
    """Show one adapter version: ADAPTER is write@2 (or an id, #6)."""
    out.show(client.adapter_by_name(adapter), render_adapter)


@adapter.command("tag")
@adapter_argument()
@click.argument("tags", nargs=-1, callback=parse_tags, metavar="[KEY=VALUE]...")
@click.option("--remove", multiple=True, metavar="KEY", help="Drop this tag (repeat).")
@client_command(mutation=True)
def adapter_tag(
    client: RegistryClient,
    out: Output,
    adapter: str,
    tags: dict[str, str],
    remove: tuple[str, ...],
) -> None:
    """Set KEY=VALUE tags on an ADAPTER version (and --remove others)."""
    if not tags and not remove:
        raise click.UsageError("give KEY=VALUE tags to set or --remove KEY")
    tagged = client.tag_adapter(client.resolve_adapter(adapter), tags, remove)
    out.confirm(tagged, tags_line, render_adapter)


@adapter.command("lineage")
@adapter_argument()
@client_command()
def adapter_lineage(client: RegistryClient, out: Output, adapter: str) -> None:
    """Show an ADAPTER version's ancestors and descendants."""
    out.show(client.lineage(client.resolve_adapter(adapter)), render_lineage)


DONE = {"approve": "approved", "reject": "rejected", "revoke": "revoked"}


def _decision(verb: str, doc: str) -> click.Command:
    @click.command(verb, help=doc)
    @adapter_argument()
    @click.option("--reason", default=None)
    @click.option(
        "--key",
        "key_file",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        default=None,
        hidden=verb != "approve",
        help="The approver's private key: sign the version's identity (signed trust).",
    )
    @client_command(mutation=True)
    def command(
        client: RegistryClient,
        out: Output,
        adapter: str,
        reason: str | None,
        key_file: Path | None,
    ) -> None:
        adapter_id = client.resolve_adapter(adapter)
        if key_file is not None:
            if verb != "approve":
                raise click.UsageError("--key signs approvals only")
            from registry.trust import load_signer

            client.sign_approval(adapter_id, load_signer(key_file))
        decided = getattr(client, verb)(adapter_id, reason)
        out.confirm(decided, adapter_line(DONE[verb]), render_adapter)

    return command


approve = _decision(
    "approve", "Approve a candidate ADAPTER, e.g. write@2 (not by the principal who pushed it)."
)
reject = _decision("reject", "Reject a candidate ADAPTER version (write@2, or an id: #6).")
revoke = _decision("revoke", "Revoke an approved ADAPTER version (write@2, or an id: #6).")
for _decided in (approve, reject, revoke, verify):
    adapter.add_command(_decided)
