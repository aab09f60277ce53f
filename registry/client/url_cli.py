"""The registry URL on the command line: `--registry`, else `$WEACT_URL`.

One option and one variable name the registry for every command of every package:
`--registry` and `WEACT_URL` (`--url`, the registry commands' old spelling, still works for
one release, hidden from --help). Each reads, in order, the option, `$WEACT_URL`, the deprecated
`$WEACT_REGISTRY_URL` (with a one-line warning on stderr), then `http://127.0.0.1:8000`.
A value that is not an http(s) URL is a usage error (exit 2), found by the client's own
check (`check_url`): the client owns what a registry URL is, and this is its command-line
face, beside it (a CLI module: it imports click; library code never imports it).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from clikit.options import AliasedOption
from registry.client.transport import check_url

F = TypeVar("F", bound=Callable[..., Any])

URL_ENV = "WEACT_URL"
DEPRECATED_URL_ENVS = ("WEACT_REGISTRY_URL",)
DEFAULT_URL = "http://127.0.0.1:8000"


def registry_url(given: str | None) -> str:
    """The registry URL: `given`, else `$WEACT_URL`, else a deprecated variable, else the
    default; `InvalidError` (a `ValueError`) if it is not http(s)://HOST[:PORT]."""
    url = given or os.environ.get(URL_ENV) or _deprecated_env() or DEFAULT_URL
    return check_url(url)


def _deprecated_env() -> str | None:
    for name in DEPRECATED_URL_ENVS:
        value = os.environ.get(name)
        if value:
            _warn_deprecated(name)
            return value
    return None


@functools.cache
def _warn_deprecated(name: str) -> None:
    """Once per process (`weact train publish` reads the URL twice: group and command)."""
    click.echo(f"Warning: {name} is deprecated, set {URL_ENV} instead", err=True)


class RegistryUrlOption(AliasedOption):
    """The registry URL option (the CLI tests find every registry command by it)."""


def _resolve(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    try:
        return registry_url(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from exc


def url_configured() -> bool:
    """Whether a registry URL is configured in the environment (`$WEACT_URL` or a
    deprecated variable), as opposed to the default."""
    return any(os.environ.get(name) for name in (URL_ENV, *DEPRECATED_URL_ENVS))


def _resolve_configured(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """Like `_resolve`, but None when neither the option nor the environment names one."""
    if value is None and not url_configured():
        return None
    return _resolve(ctx, param, value)


OLD_SPELLINGS = ("--url",)
"""Hidden: the registry commands' `--url` before every command took `--registry`."""


def registry_url_option(
    name: str = "registry_url", help: str = "Registry URL.", configured_only: bool = False
) -> Callable[[F], F]:
    """`--registry` (old spelling `--url`, hidden) as the parameter `name`, read as the
    module docstring says; `configured_only`: None instead of the default when nothing
    names a registry."""
    return click.option(
        "--registry",
        *OLD_SPELLINGS,
        name,
        cls=RegistryUrlOption,
        hidden_opts=OLD_SPELLINGS,
        default=None,
        callback=_resolve_configured if configured_only else _resolve,
        metavar="URL",
        help=f"{help} [default: ${URL_ENV}, else {DEFAULT_URL}]",
    )
