"""`weact key create`, `weact root init|add-key|revoke-key|threshold|sign|show|publish|status`,
`weact verify`.

Offline tools but for `root publish` and `root status`. A key pair is two files; the private one
stays with its owner. The root of trust is one `root.json` (python-tuf root metadata) that
admins edit and sign in turn: an edit of a signed root makes the next version, unsigned, so
that a rotation needs the admin threshold again.

    weact key create alice --dir ~/.weact/keys          # alice.key, alice.pub.json
    weact root init root.json --admin a1.pub.json --admin a2.pub.json --threshold 2
    weact root add-key root.json publish alice.pub.json
    weact root add-key root.json approve:prod bob.pub.json
    weact root threshold root.json approve:prod 2
    weact root sign root.json --key a1.key; weact root sign root.json --key a2.key

Two talk to a registry: `weact root publish root.json` hands it the next version (nodes
take it from there), `weact root status` shows its mode and the version it serves.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from clikit.options import json_option
from clikit.output import Output
from registry.cli.base import client_command, fail_cleanly
from registry.client import RegistryClient

if TYPE_CHECKING:  # registry.trust imports securesystemslib, which imports boto3: 0.3 s on
    # every `weact adapter` command (verify is one of them); imported where a command signs
    from registry.trust import TrustRoot

FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


def _role(role: str) -> str:
    kind, _, scope = role.partition(":")
    return role if kind in ("admin", "timestamp") or scope else f"{kind}:*"


def _show(root: TrustRoot, as_json: bool) -> None:
    Output(as_json).show(root.summary(), lambda s: json.dumps(s, indent=2))


def _edit(path: Path, change: Callable[[TrustRoot], None], as_json: bool) -> TrustRoot:
    """Read the root in `path` as it stands (unverified: it may be mid-signing), apply
    `change`, write it back and show it."""
    from registry.trust import TrustRoot

    trust = TrustRoot.from_bytes(path.read_bytes(), label=str(path))
    change(trust)
    trust.save(path)
    _show(trust, as_json)
    return trust


@click.group()
def key() -> None:
    """Key pairs for signing (the private key stays in its owner's file)."""


@key.command("create")
@click.argument("name")
@click.option("--dir", "directory", type=click.Path(path_type=Path), default=Path("."))
@json_option
@fail_cleanly()
def key_create(name: str, directory: Path, as_json: bool) -> None:
    """Create NAME.key (private, mode 0600) and NAME.pub.json (give this one to an admin)."""
    from registry.trust import create_key

    private, public = create_key(directory, name)
    result = {"private": str(private), "public": str(public), "keyid": _keyid(public)}
    Output(as_json).show(result, lambda r: f"{r['keyid']}\n  private: {r['private']}")


def _keyid(public: Path) -> str:
    from registry.trust import load_public_key

    return str(load_public_key(public).keyid)


@click.group()
def root() -> None:
    """The offline root of trust: who may publish and approve, and how many must sign."""


@root.command("init")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--admin", "admins", type=FILE, multiple=True, required=True, help="Public key.")
@click.option("--threshold", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--expires-days", type=click.IntRange(min=1), default=365, show_default=True)
@json_option
@fail_cleanly()
def root_init(
    path: Path, admins: tuple[Path, ...], threshold: int, expires_days: int, as_json: bool
) -> None:
    """A new root (version 1, unsigned) whose admin keys are --admin."""
    from registry.trust import TrustRoot, load_public_key

    if path.exists():
        raise click.UsageError(f"{path} exists")
    trust = TrustRoot.create([load_public_key(p) for p in admins], threshold, expires_days)
    trust.save(path)
    _show(trust, as_json)


@root.command("add-key")
@click.argument("path", type=FILE)
@click.argument("role")
@click.argument("public_key", type=FILE)
@json_option
@fail_cleanly()
def root_add_key(path: Path, role: str, public_key: Path, as_json: bool) -> None:
    """Let PUBLIC_KEY sign as ROLE (admin, publish[:CAPABILITY], approve[:CHANNEL])."""
    from registry.trust import load_public_key

    _edit(path, lambda trust: trust.add_key(_role(role), load_public_key(public_key)), as_json)


@root.command("revoke-key")
@click.argument("path", type=FILE)
@click.argument("role")
@click.argument("keyid")
@json_option
@fail_cleanly()
def root_revoke_key(path: Path, role: str, keyid: str, as_json: bool) -> None:
    """Take KEYID out of ROLE (a signed root becomes the next version, to sign again)."""
    _edit(path, lambda trust: trust.revoke_key(_role(role), keyid), as_json)


@root.command("threshold")
@click.argument("path", type=FILE)
@click.argument("role")
@click.argument("threshold", type=click.IntRange(min=1))
@json_option
@fail_cleanly()
def root_threshold(path: Path, role: str, threshold: int, as_json: bool) -> None:
    """How many keys of ROLE must sign (e.g. approve:prod 2)."""
    _edit(path, lambda trust: trust.set_threshold(_role(role), threshold), as_json)


@root.command("sign")
@click.argument("path", type=FILE)
@click.option("--key", "key_file", type=FILE, required=True, help="An admin's private key.")
@click.option("--previous", type=FILE, default=None, help="The trusted root it replaces.")
@json_option
@fail_cleanly()
def root_sign(path: Path, key_file: Path, previous: Path | None, as_json: bool) -> None:
    """Add an admin's signature; says whether the root now verifies (and follows --previous)."""
    from registry.trust import TrustRoot, load_signer

    trust = _edit(path, lambda trust: trust.sign(load_signer(key_file)), as_json)
    try:
        trust.verify(TrustRoot.load(previous) if previous else None)
    except PermissionError as exc:
        click.echo(f"not yet trusted: {exc}", err=True)
    else:
        click.echo(f"{path}: version {trust.version} verifies", err=True)


@root.command("show")
@click.argument("path", type=FILE)
@json_option
@fail_cleanly()
def root_show(path: Path, as_json: bool) -> None:
    """The roles, keys and thresholds of a root, and whether it verifies."""
    from registry.trust import TrustRoot

    trust = TrustRoot.load(path)
    _show(trust, as_json)


@root.command("publish")
@click.argument("path", type=FILE)
@client_command()
def root_publish(client: RegistryClient, out: Output, path: Path) -> None:
    """Hand the registry the next root version (an admin token); it serves it to nodes,
    which accept it only when the admin threshold of the version they trust signed it."""
    from registry.trust import TrustRoot

    trust = TrustRoot.load(path)
    out.show(
        client.publish_trust_root(trust.metadata.to_dict()),
        lambda r: f"the registry serves root version {r['version']} (after {r['previous']})",
    )


@root.command("status")
@client_command()
def root_status(client: RegistryClient, out: Output) -> None:
    """The registry's mode (development or strict) and the root version it serves."""
    out.show(client.get_trust(), _render_status)


def _render_status(status: dict[str, Any]) -> str:
    root = status["root"]
    if root is None:
        return f"{status['mode']}: no root of trust"
    kind = "development root (keys on the registry's host)" if root["development"] else "root"
    return f"{status['mode']}: {kind} version {root['version']}, expires {root['expires']}"


@click.command("verify")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--root", "root_file", type=FILE, required=True, help="The root of trust.")
@click.option("--channel", default=None, help="Also require this channel's approvals.")
@click.option("--signatures", type=FILE, default=None, help="Default: DIRECTORY/signatures.json.")
@json_option
@fail_cleanly()
def verify(
    directory: Path, root_file: Path, channel: str | None, signatures: Path | None, as_json: bool
) -> None:
    """Check a pulled adapter DIRECTORY and its signatures against the root, offline."""
    from registry.trust import TrustRoot
    from registry.trust.offline import verify_directory

    verdict = verify_directory(directory, TrustRoot.load(root_file), channel, signatures)
    Output(as_json).show(
        verdict,
        lambda v: (
            f"{v['capability']} {v['manifest_root'][:12]}: signed by "
            f"{len(v['publishers'])} publisher(s), {len(v['approvers'])} approver(s) "
            f"(root version {v['root_version']})"
        ),
    )
