"""Options every client command shares: who asks (`--token`, `$WEACT_TOKEN`), and JSON,
and `AliasedOption`, an option whose old spellings still work but are hidden from --help.

Where the registry is (`--registry`, `$WEACT_URL`) is the registry client's own option,
`registry.client.url_cli`: the client owns what a registry URL is. This module imports
nothing of the project.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


class AliasedOption(click.Option):
    """An option with old spellings (`hidden_opts`) that still parse but that --help omits
    (kept one release after a rename, as `cli/main.py` keeps old command names)."""

    def __init__(self, *args: Any, hidden_opts: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hidden_opts = hidden_opts

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        record = super().get_help_record(ctx)
        if record is None or not self.hidden_opts:
            return record
        shown = [opt for opt in self.opts if opt not in self.hidden_opts]
        names, help_text = record
        metavar = self.make_metavar(ctx) if not self.is_flag else ""
        joined = ", ".join(shown)
        return (f"{joined} {metavar}".rstrip() if metavar else joined), help_text


def token_option(*decls: str, help: str = "Bearer token.") -> Callable[[F], F]:
    return click.option(*(decls or ("--token",)), envvar="WEACT_TOKEN", default=None, help=help)


def verbose_option(fn: F) -> F:
    return click.option(
        "-v", "--verbose", is_flag=True, help="Print the whole record, not one line."
    )(fn)


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(fn)


def hidden_alias(command: click.Command, spelling: str) -> click.Command:
    """`command` under an old name: it runs as before, after a one-line note on stderr
    naming `spelling` (the new one), and --help omits it. Old names live one release."""
    import copy
    import functools

    alias = copy.copy(command)
    alias.hidden = True
    callback = command.callback
    if callback is not None:

        @functools.wraps(callback)
        def noted(*args: Any, **kwargs: Any) -> Any:
            click.echo(f"Note: this spelling is deprecated, use `{spelling}`", err=True)
            return callback(*args, **kwargs)

        alias.callback = noted
    return alias
