"""Options every client command shares: who asks (`--token`, `$WEACT_TOKEN`), and JSON.

Where the registry is (`--url` / `--registry`, `$WEACT_URL`) is the registry client's own
option, `registry.client.url_cli`: the client owns what a registry URL is. This module
imports nothing of the project.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def token_option(*decls: str, help: str = "Bearer token.") -> Callable[[F], F]:
    return click.option(*(decls or ("--token",)), envvar="WEACT_TOKEN", default=None, help=help)


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(fn)
