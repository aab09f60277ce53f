"""How every `weact` command fails: one line on stderr, never a traceback, and an exit code.

    0  done
    1  the operation failed or was refused (an error answer, no answer, a broken chain,
       a file that is not what it should be)             -> `CommandError`
    2  a usage error (click's own: a bad option or argument), and for `weact channel gate` a check
       that could not run                                   -> `click.UsageError`, `UncheckedError`

`fail_cleanly(*handled)` wraps a command so that the typed errors it can meet (`OSError`,
JSON that does not parse, plus the error trees its package passes: `RegistryError`,
`StorageError`, `RuntimeEngineError`, `TrainerError`) become a `CommandError`, which click
prints as `Error: <one line>`. An error carrying a string `code` and a `detail` (the
registry's) reads `<code>: <detail>`; a package whose errors need more passes `describe`
(the registry CLI describes a gate's refusal by its failing benchmarks). An error that has
more to say (`details`, or the `problems` of an adapter that does not fit) says it on
request: with `WEACT_DETAILS=1` each line of it goes to stderr before the one-line error.
Anything else is a bug and keeps its traceback. This module imports nothing of the project.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

EXIT_FAILED = 1
EXIT_USAGE = 2


class CommandError(click.ClickException):
    """A failure shown as one line on stderr (click prints `Error: <message>`), exit 1."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class UncheckedError(CommandError):
    """A check (`weact channel gate`) that could not run: exit 2, apart from a failed check's 1."""

    exit_code = EXIT_USAGE


Describer = Callable[[BaseException], str | None]
"""A package's own wording for some of its errors: the one line, or None for the default."""


def describe_error(exc: BaseException, describe: Sequence[Describer] = ()) -> str:
    """The one-line message of an error a command can run into: the first of `describe`
    that has one, else `<code>: <detail>` for an error that carries both, else its text."""
    for describer in describe:
        described = describer(exc)
        if described is not None:
            return described
    code = getattr(exc, "code", None)
    if isinstance(code, str) and hasattr(exc, "detail"):
        return f"{code}: {one_line(exc.detail)}"
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON: {exc}"
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return one_line(f"{exc.filename}: {exc.strerror}")
    return one_line(str(exc) or type(exc).__name__)


def one_line(detail: Any, limit: int = 400) -> str:
    """`detail` (a message, a server's structured detail) as one line of at most `limit`."""
    text = " ".join(_detail_text(detail).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _detail_text(detail: Any) -> str:
    """A server error's detail as text: a message, its problems, or validation errors."""
    if isinstance(detail, str):
        return detail
    if isinstance(detail, dict) and isinstance(detail.get("message"), str):
        problems = detail.get("problems")
        listed = "; ".join(map(str, problems)) if isinstance(problems, list) else ""
        return f"{detail['message']}: {listed}" if listed else detail["message"]
    if isinstance(detail, list) and all(isinstance(d, dict) and "msg" in d for d in detail):
        return "; ".join(f"{'.'.join(map(str, d.get('loc', ())))}: {d['msg']}" for d in detail)
    return json.dumps(detail, separators=(",", ":"))


DETAILS_ENV = "WEACT_DETAILS"


def details_of(exc: BaseException) -> list[str]:
    """What an error can say beyond its one line: its `details` or `problems`."""
    for name in ("details", "problems"):
        value = getattr(exc, name, None)
        if isinstance(value, list | tuple) and value:
            return [str(v) for v in value]
    return []


HANDLED: tuple[type[Exception], ...] = (OSError, json.JSONDecodeError)
"""What any command may fail with, besides the error trees its package passes."""


def fail_cleanly(
    *also: type[Exception],
    error: type[CommandError] = CommandError,
    describe: Sequence[Describer] = (),
) -> Callable[[F], F]:
    """Turn the errors a command can meet into `error`: one line on stderr, its exit code.

    Catches `OSError`, JSON that does not parse, and the `also` classes (the error bases of
    the packages the command calls); `describe` words some of them (see `describe_error`).
    """
    handled = (*HANDLED, *also)

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except handled as exc:
                more = details_of(exc)
                if more and os.environ.get(DETAILS_ENV, "") not in ("", "0"):
                    for line in more:
                        click.echo(f"  {line}", err=True)
                message = describe_error(exc, describe)
                cut = message.endswith("...") or hasattr(exc, "details")
                if more and cut and not os.environ.get(DETAILS_ENV):
                    message = f"{message} ({len(more)} details: set {DETAILS_ENV}=1)"
                raise error(message) from exc

        return wrapper  # type: ignore[return-value]

    return decorate
