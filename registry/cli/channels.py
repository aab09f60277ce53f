"""`weact promote`, `weact gate` (exit code for CI), `weact rollback`, `weact channel ...`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Group
from rich.text import Text

from clikit.errors import UncheckedError
from clikit.output import Output
from registry import errors
from registry.cli.base import client_command, signer_of
from registry.cli.render import (
    render_gate,
    render_revision,
    render_revisions,
    required_line,
    revision_line,
)
from registry.client import GateReport, RegistryClient
from registry.gate_rules import PASSING
from registry.names import parse_adapter_ref

F = TypeVar("F", bound=Callable[..., Any])

key_option = click.option(
    "--key",
    "key_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="An approver's private key: sign the new revision (signed trust).",
)


def parse_assignments(pairs: Sequence[str]) -> dict[str, str | None]:
    """`--adapter` values into {capability: adapter name}: `write=2` is version 2 of write
    (`write@2`), `write=#6` the version with id 6, `write@2` alone is `write=2`, and
    `write=` or `write=none` removes the capability."""
    parsed: dict[str, str | None] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep and "@" in pair:
            name, _, version = pair.partition("@")
            value, sep = version, "="
        value = value.strip()
        if not sep or not name:
            raise click.BadParameter(
                f"{pair!r}: expected CAPABILITY=VERSION (write=2), CAPABILITY@VERSION or "
                "CAPABILITY=#ID",
                param_hint="--adapter",
            )
        if value.lower() in ("", "none", "null"):
            parsed[name] = None
            continue
        ref = value if value.startswith("#") or "@" in value else f"{name}@{value}"
        try:
            parsed_ref = parse_adapter_ref(ref)
        except errors.InvalidError as exc:
            raise click.BadParameter(f"{pair!r}: {exc}", param_hint="--adapter") from None
        if parsed_ref.capability not in (None, name):
            raise click.BadParameter(
                f"{pair!r}: {ref} is not a version of {name!r}", param_hint="--adapter"
            )
        parsed[name] = ref
    return parsed


def _parse_order(order: str | None) -> list[str] | None:
    return [name.strip() for name in order.split(",") if name.strip()] if order else None


def _promotion_options(fn: F) -> F:
    options = [
        click.argument("channel"),
        click.option(
            "--adapter",
            "adapters",
            multiple=True,
            metavar="CAP=VERSION",
            help="write=2 is write@2 (or write=#ID; write= removes write). Repeatable.",
        ),
        click.option("--order", default=None, help="Hard order, comma separated."),
        click.option("--backbone", "backbone_root", default=None, help="Backbone root."),
        click.option("--expected-revision", type=int, default=None),
        click.option(
            "--create",
            is_flag=True,
            help="Create CHANNEL if it does not exist (without it, an unknown channel is an "
            "error: a typo never makes a new channel).",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _promotion(
    client: RegistryClient,
    adapters: Sequence[str],
    order: str | None,
    backbone_root: str | None,
    **rest: Any,
) -> dict[str, Any]:
    """The PromoteRequest fields of the promote and gate options, adapters named by id (the
    server takes the backbone from the adapters when a new channel is named without one)."""
    named = parse_assignments(adapters)
    return {
        "adapters": {
            cap: client.resolve_adapter(ref, backbone_root) if ref else None
            for cap, ref in named.items()
        },
        "order": _parse_order(order),
        "backbone": backbone_root,
        **rest,
    }


@click.command()
@_promotion_options
@click.option("--reason", default=None, help="Why, stored on the revision.")
@key_option
@client_command(mutation=True)
def promote(
    client: RegistryClient, out: Output, channel: str, key_file: Path | None, **options: Any
) -> None:
    """Promote adapters into CHANNEL as a new revision, if the gate passes."""
    request = _promotion(client, **options)
    signer = signer_of(key_file)
    link = f"{client.url}/gates?channel={channel}"
    try:
        result = client.promote(channel, **request, signer=signer)
    except errors.GateFailedError as exc:
        if isinstance(exc.detail, dict):
            out.show(exc.detail, lambda r: Group(render_gate(r), gate_line(r, link)))
        raise
    render = render_revision if out.verbose else revision_line("promoted")
    out.show(result, lambda r: Group(render(r["revision"]), gate_line(r["gate"], link)))


def gate_verdict(report: GateReport) -> str:
    """`gate: passed (2 checks)`, `gate: FAILED (1 of 2 checks failed)`, or ungated."""
    checks = report.get("checks", [])
    if not checks:
        return "gate: passed, UNGATED (no benchmark covers this change)"
    failing = sum(1 for c in checks if c["verdict"] not in PASSING)
    if report["passed"]:
        return f"gate: passed ({len(checks)} checks)"
    return f"gate: FAILED ({failing} of {len(checks)} checks did not pass)"


def gate_line(report: GateReport, link: str) -> Text:
    return Text(f"{gate_verdict(report)}; report: {link}")


@click.command()
@_promotion_options
@click.option(
    "--allow-ungated",
    is_flag=True,
    help="Exit 0 when no benchmark covers the change (without it: exit 1, an empty gate "
    "proves nothing).",
)
@client_command(UncheckedError)
def gate(
    client: RegistryClient, out: Output, channel: str, allow_ungated: bool, **options: Any
) -> None:
    """Dry-run the gate for a promotion: exit 0 pass, 1 fail (or covered by no benchmark,
    unless --allow-ungated), 2 could not check (an unknown CHANNEL too, unless --create:
    the promotion would create it)."""
    report = client.gate(channel, **_promotion(client, **options))
    out.show(report, lambda r: Group(render_gate(r), Text(gate_verdict(r))))
    if not report["passed"]:
        raise click.exceptions.Exit(1)
    if not report["checks"] and not allow_ungated:
        click.echo(
            "gate: no benchmark covers this change, so nothing was checked; define one "
            "(weact benchmark create) or pass --allow-ungated",
            err=True,
        )
        raise click.exceptions.Exit(1)


@click.command()
@click.argument("channel")
@click.option("--to", "to_revision", type=int, required=True, help="Revision to restore.")
@click.option("--expected-revision", type=int, default=None)
@click.option("--reason", default=None, help="Why, stored on the revision.")
@key_option
@client_command(mutation=True)
def rollback(
    client: RegistryClient,
    out: Output,
    channel: str,
    to_revision: int,
    expected_revision: int | None,
    reason: str | None,
    key_file: Path | None,
) -> None:
    """Append a revision to CHANNEL equal to an earlier one."""
    rev = client.rollback(
        channel,
        to_revision=to_revision,
        expected_revision=expected_revision,
        reason=reason,
        signer=signer_of(key_file),
    )
    line = revision_line(f"rolled back to r{to_revision}, as")
    out.confirm(rev, line, render_revision)


@click.group()
def channel() -> None:
    """Channels: promote, rollback, gate, require, sign, show, list, revisions, wait."""


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


@channel.command("sign")
@click.argument("name")
@click.option("--revision", "number", type=int, required=True, help="The revision to sign.")
@click.option(
    "--key",
    "key_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="An approver's private key.",
)
@client_command()
def channel_sign(
    client: RegistryClient, out: Output, name: str, number: int, key_file: Path
) -> None:
    """Co-sign revision N of channel NAME (as the registry serves it) with an approver key:
    a node counts a revision once the channel's threshold of approvers signed it."""
    from registry.trust import load_signer

    signed = client.sign_channel_revision(name, number, load_signer(key_file))
    out.show(signed, lambda s: f"signed {s['channel']} revision {s['revision']} as {s['keyid']}")


@channel.command("require")
@click.argument("name")
@click.argument("benchmarks", nargs=-1)
@client_command(mutation=True)
def channel_require(
    client: RegistryClient, out: Output, name: str, benchmarks: tuple[str, ...]
) -> None:
    """Set the BENCHMARKS every gate of channel NAME must judge (none given: requires none).

    A required benchmark with no evaluation for a change fails the gate as `missing`."""
    out.confirm(client.require_benchmarks(name, benchmarks), required_line, render_revision)


for _verb in (promote, rollback, gate):
    channel.add_command(_verb)
