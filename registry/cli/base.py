"""What the registry's commands add to `clikit`: their errors, and the client commands.

`fail_cleanly` is `clikit.errors.fail_cleanly` catching the registry's and storage's typed
errors too, and describing a gate's refusal by the benchmarks that did not pass;
`client_command` gives a command --registry/--token/--json and calls it with a `RegistryClient`
and an `Output`; `adapter_argument` is an adapter as people name it (`write@2`, or `#6`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from clikit import errors as kit
from clikit.errors import CommandError
from clikit.options import json_option, token_option, verbose_option
from clikit.output import Output
from registry import errors
from registry.names import parse_adapter_ref
from storage.errors import StorageError

if TYPE_CHECKING:
    from securesystemslib.signer import Signer

F = TypeVar("F", bound=Callable[..., Any])


def signer_of(key_file: Path | None) -> Signer | None:
    """The private key in `key_file` as a signer, None without one. `registry.trust` is
    imported here, by the commands that sign: it imports securesystemslib and, through it,
    boto3 (0.3 s that every other `weact adapter` or `weact channel` command would pay)."""
    if key_file is None:
        return None
    from registry.trust import load_signer

    return load_signer(key_file)


HANDLED: tuple[type[Exception], ...] = (errors.RegistryError, StorageError)
"""What a registry command may fail with, besides clikit's own (`OSError`, bad JSON)."""


def describe_gate(exc: BaseException) -> str | None:
    """A gate's refusal, named by the benchmarks that did not pass (its detail is the report)."""
    if isinstance(exc, errors.GateFailedError) and isinstance(exc.detail, dict):
        failing = [c["benchmark"] for c in exc.detail.get("checks", []) if c["verdict"] != "pass"]
        return f"gate_failed: promotion refused by the gate ({', '.join(failing) or 'no checks'})"
    return None


def describe_error(exc: BaseException) -> str:
    """The one line a registry command prints for `exc`."""
    return kit.describe_error(exc, (describe_gate,))


def fail_cleanly(
    *also: type[Exception], error: type[CommandError] = CommandError
) -> Callable[[F], F]:
    """`clikit.errors.fail_cleanly` for the registry's and storage's errors, and `also`."""
    return kit.fail_cleanly(*HANDLED, *also, error=error, describe=(describe_gate,))


def client_command(
    error: type[CommandError] = CommandError, *, mutation: bool = False
) -> Callable[[F], F]:
    """Add --registry/--token/--json (and -v for a `mutation`, which prints one line
    without it) and call the command with `client=` and `out=`. The client (and httpx) is
    imported here, by the modules of client commands: `weact serve` and the commands that go
    to the database directly import this module for `fail_cleanly` alone."""
    from registry.client import RegistryClient
    from registry.client.url_cli import registry_url_option

    def decorate(fn: F) -> F:
        @fail_cleanly(error=error)
        @functools.wraps(fn)
        def wrapper(
            url: str, token: str | None, as_json: bool, verbose: bool = False, **kwargs: Any
        ) -> Any:
            with RegistryClient(url, token) as client:
                return fn(client=client, out=Output(as_json, verbose), **kwargs)

        decorated = json_option(token_option()(registry_url_option("url")(wrapper)))
        return verbose_option(decorated) if mutation else decorated  # type: ignore[return-value]

    return decorate


def check_adapter_name(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Reject a malformed adapter name (`write@2`, `#6`, `6`) before anything is asked."""
    for one in value if isinstance(value, tuple) else (value,):
        if one is not None:
            try:
                parse_adapter_ref(one)
            except errors.InvalidError as exc:
                raise click.BadParameter(str(exc), ctx, param) from None
    return value


def adapter_argument(name: str = "adapter") -> Callable[[F], F]:
    """An ADAPTER argument: `capability@version` (`write@2`) or an id (`#6`, `6`)."""
    return click.argument(name, metavar="ADAPTER", callback=check_adapter_name)
