"""`weact runtime` commands (mounted lazily by cli/main.py).

    weact runtime serve --backbone PATH --adapter NAME=DIR [...] [--policy hard|soft]
                        [--order plan,search,write] [--host H] [--port P] [--client-token T ...]
                        [--admin-token T ...] [--handle-idle S]
    weact runtime serve --backbone PATH --registry URL --channel prod [--node-id ID]
                        [--registry-token T] [--library-dir DIR] [--poll-wait S]
                        [--heartbeat S]
    weact runtime run   --task "..." --backbone PATH --adapter NAME=DIR [...] [--json]
    weact runtime mcp   --backbone PATH --adapter NAME=DIR [...]      (MCP over stdio)
    weact runtime backbone                  the packaged SmolLM2's directory (converted once)

`--backbone smollm2` selects the packaged SmolLM2-135M-Instruct (converted once, cached).
Defaults come from `WEACT_RUNTIME_*` (see runtime/settings.py); the token also from
`WEACT_RUNTIME_TOKEN` (`--client-token`, what clients present; `--token` is its old spelling,
hidden; admin tokens, which see every client's episodes, from
`WEACT_RUNTIME_ADMIN_TOKEN`), the registry token from `WEACT_TOKEN`. With `--channel` the library
is the channel's current revision, kept current by `runtime.follow.ChannelFollower`
(exclusive with `--adapter`); the registry is `--registry`, else `$WEACT_URL`, as for every
`weact` command (`clikit.options`). The registry is asked for the channel before the
backbone loads, so a registry that does not answer costs no model load. Failures are one line
on stderr (`clikit.errors`): exit 1, or 2 for a usage error (`NodeOptionsError`). A SmolLM2
conversion and each library install show their steps on stderr (`clikit.progress`). The task
world's tools (`search`, `fetch_document`, `calculate` over `tasks`' default world) are offered
unless `--no-kb`; `--tool-server URL` adds external
MCP tool servers (streamable HTTP).
"""

from __future__ import annotations

import functools
import json
import logging
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import SecretStr

from clikit.errors import fail_cleanly
from clikit.options import AliasedOption, token_option
from clikit.output import stdout_to_stderr
from clikit.progress import steps
from registry.client.url_cli import registry_url_option
from registry.errors import RegistryError
from runtime.assemble import (
    build_engine,
    channel_client,
    check_before_loading,
    check_library_source,
    close_engine,
    episode_setup,
    start_follower,
)
from runtime.engine import Engine
from runtime.errors import NodeOptionsError, RuntimeEngineError
from runtime.settings import get_settings
from storage.errors import StorageError

F = TypeVar("F", bound=Callable[..., Any])


def parse_adapter(
    ctx: click.Context, param: click.Parameter, values: Sequence[str]
) -> list[tuple[str, Path]]:
    """`NAME=DIR` pairs -> [(name, Path)], each DIR a directory, each NAME once."""
    pairs: list[tuple[str, Path]] = []
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise click.BadParameter(f"{value!r} is not NAME=DIR", ctx, param)
        if not Path(path).is_dir():
            raise click.BadParameter(f"{path!r} is not a directory", ctx, param)
        if name in (n for n, _ in pairs):
            raise click.BadParameter(f"adapter {name!r} is given twice", ctx, param)
        pairs.append((name, Path(path)))
    return pairs


def parse_guess(
    ctx: click.Context, param: click.Parameter, values: Sequence[str]
) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values:
        src, sep, dst = value.partition("=")
        if not sep or not src or not dst:
            raise click.BadParameter(f"{value!r} is not FROM=TO", ctx, param)
        pairs[src] = dst
    return pairs


def engine_options(fn: F) -> F:
    """Options shared by every command that loads an engine and runs episodes."""
    options = [
        click.option("--backbone", required=True, help="Backbone directory, or 'smollm2'."),
        click.option(
            "--adapter",
            "adapters",
            multiple=True,
            callback=parse_adapter,
            metavar="NAME=DIR",
            help="A capability and its PEFT adapter directory (repeat).",
        ),
        click.option("--engine", "engine_kind", default="peft", show_default=True),
        click.option("--policy", type=click.Choice(["hard", "soft"]), default=None),
        click.option("--order", default=None, help="Hard order, e.g. plan,search,write."),
        click.option(
            "--guess",
            "guesses",
            multiple=True,
            callback=parse_guess,
            metavar="FROM=TO",
            help="Soft policy: prefetch TO while FROM runs a tool ('backbone' = none).",
        ),
        click.option(
            "--choose",
            "constrained",
            is_flag=True,
            default=False,
            help="Soft policy: with no adapter active, decode only valid moves (load a "
            "capability, or close) under a constraint (reference engine).",
        ),
        click.option("--max-steps", type=click.IntRange(min=1), default=None),
        click.option("--max-new-tokens", type=click.IntRange(min=1), default=None),
        click.option("--kb/--no-kb", default=True, help="Offer the task world's search tools."),
        click.option("--tool-server", "tool_servers", multiple=True, metavar="URL"),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def follow_options(fn: F) -> F:
    """Options of a node that follows a registry channel instead of local adapters."""
    options = [
        registry_url_option("registry", help="The registry of --channel."),
        click.option("--channel", default=None, help="Follow this registry channel, e.g. prod."),
        click.option("--node-id", default=None, help="Node id in heartbeats (default hostname)."),
        token_option(
            "--registry-token", help="The node's own token for --registry ($WEACT_TOKEN)."
        ),
        click.option(
            "--library-dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            help="Where pulled adapters go (default ~/.cache/weact/library/CHANNEL).",
        ),
        click.option(
            "--root",
            "trust_root",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            default=None,
            help="The offline root of trust (root.json): serve only adapters signed as it "
            "requires (a trusted publisher, the channel's threshold of approvers). Newer "
            "versions the registry serves are taken when its admin threshold signed them, "
            "and kept in the library directory.",
        ),
        click.option(
            "--poll-wait",
            type=click.FloatRange(min=0.1, max=600),
            default=30.0,
            show_default=True,
            help="Seconds each long-poll of the channel waits.",
        ),
        click.option(
            "--heartbeat",
            type=click.FloatRange(min=0.1, max=3600),
            default=10.0,
            show_default=True,
            help="Seconds between heartbeats to the registry.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _usage_errors(fn: F) -> F:
    """Options that cannot make a node (`NodeOptionsError`) -> a usage error, exit 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except NodeOptionsError as exc:
            if exc.option is not None:
                raise click.BadParameter(str(exc), param_hint=exc.option) from exc
            raise click.UsageError(str(exc)) from exc

    return wrapper  # type: ignore[return-value]


def runtime_errors(fn: F) -> F:
    """Typed errors (the runtime's, the registry client's, storage's) -> one line, exit 1;
    options that cannot make a node -> a usage error, exit 2."""
    return fail_cleanly(RegistryError, StorageError, RuntimeEngineError)(_usage_errors(fn))


@click.group(name="runtime")
def runtime() -> None:
    """Serve or run the WeAct runtime: resident adapters switched by load_lora/offload_lora."""


@runtime.command()
@engine_options
@click.option("--host", default=None, help="Bind address (default 127.0.0.1).")
@click.option("--port", type=click.IntRange(0, 65535), default=None)
@click.option(
    "--client-token",
    "--token",
    "tokens",
    cls=AliasedOption,
    hidden_opts=("--token",),
    multiple=True,
    envvar="WEACT_RUNTIME_TOKEN",
    help="A token this node's clients present (repeat for several; the env var splits on "
    "spaces). Not the node's own token for the registry: that is --registry-token.",
)
@click.option(
    "--admin-token",
    "admin_tokens",
    multiple=True,
    envvar="WEACT_RUNTIME_ADMIN_TOKEN",
    help="Bearer token that sees and cancels every client's episodes (repeatable).",
)
@click.option(
    "--handle-idle",
    type=click.FloatRange(min=0.1),
    default=None,
    help="Seconds an unused MCP episode handle lives (default 900).",
)
@follow_options
@runtime_errors
def serve(
    host: str | None,
    port: int | None,
    tokens: tuple[str, ...],
    admin_tokens: tuple[str, ...],
    handle_idle: float | None,
    **options: Any,
) -> None:
    """Serve the runtime HTTP API, with MCP at /mcp."""
    import uvicorn

    from runtime.server import create_app

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per heartbeat or poll
    settings = get_settings()
    source = click.get_current_context().get_parameter_source("registry")
    check_library_source(options, source is click.core.ParameterSource.COMMANDLINE)
    if not options["channel"]:
        names = [name for name, _ in options["adapters"]]
        check_before_loading(options, names, "--adapter NAME=DIR (repeat), or --channel")
    client = channel_client(options) if options["channel"] else None
    follower = None
    engine: Engine | None = None
    # uvicorn re-raises SIGTERM after its graceful shutdown: with the default handler the
    # process would die right there, before the engine is closed (vLLM's engine core would
    # outlive the node). Raising SystemExit instead runs the cleanup below.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        engine = _engine(options)
        if client is not None:
            follower = start_follower(engine, client, options, steps=steps)
        policy, config, targets = episode_setup(engine, options)
        host = host or settings.host
        secrets = list(tokens) or _split(settings.token)
        admins = list(admin_tokens) or _split(settings.admin_token)
        app = create_app(
            engine,
            policy=policy,
            agent_config=config,
            tool_servers=targets,
            token=secrets,
            admin_token=admins,
            host=host,
            max_episodes=settings.max_episodes,
            source=follower,
            handle_idle_s=handle_idle or settings.handle_idle_s,
        )
        uvicorn.run(app, host=host, port=port if port is not None else settings.port)
    finally:
        if follower is not None:
            follower.stop()
        if client is not None:
            client.close()
        if engine is not None:
            close_engine(engine)


def _split(tokens: SecretStr | None) -> list[str]:
    """Tokens from a setting that holds several, separated by spaces."""
    return tokens.get_secret_value().split() if tokens else []


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


@runtime.command()
@click.option("--task", required=True, help="What the agent should do.")
@engine_options
@click.option("--json", "as_json", is_flag=True, help="Print the trajectory as JSON.")
@runtime_errors
def run(task: str, as_json: bool, **options: Any) -> None:
    """Run one episode in-process and print its trajectory."""
    from runtime.trajectory_cli import print_trajectory, run_episode

    names = [name for name, _ in options["adapters"]]
    check_before_loading(options, names, "--adapter NAME=DIR (repeat)")
    with stdout_to_stderr():  # an engine's logs (vLLM's go to stdout) never mix with the result
        engine = _engine(options)
        try:
            policy, config, targets = episode_setup(engine, options)
            episode = run_episode(engine, policy, config, targets, task)
        finally:
            close_engine(engine)
    if as_json:
        click.echo(json.dumps(episode.to_json(), indent=2))
    else:
        print_trajectory(episode)
    if episode.status != "done":
        raise click.ClickException(f"episode failed: {episode.error}")


@runtime.command()
@click.option("--json", "as_json", is_flag=True, help="Print {name, path} as JSON.")
@runtime_errors
def backbone(as_json: bool) -> None:
    """Print the directory of the packaged SmolLM2-135M-Instruct backbone (safetensors and
    tokenizer), converting its GGUF there first if needed (once, about 30 s): the directory
    to give `weact backbone register`, `weact train --backbone` and `--backbone`."""
    from runtime.models import smollm2_dir

    path = smollm2_dir(steps=steps)
    if as_json:
        click.echo(json.dumps({"name": "smollm2", "path": str(path)}, indent=2))
    else:
        click.echo(str(path))


@runtime.command()
@engine_options
@runtime_errors
def mcp(**options: Any) -> None:
    """Serve load_lora / offload_lora over MCP stdio (one client, one episode)."""
    from runtime.episode import EpisodeManager
    from runtime.mcp_server import build_mcp_server

    check_before_loading(options, [n for n, _ in options["adapters"]], "--adapter NAME=DIR")
    engine = _engine(options)
    try:
        policy, _, _ = episode_setup(engine, options)
        build_mcp_server(EpisodeManager(engine, policy=policy), stdio=True).run("stdio")
    finally:
        close_engine(engine)


def _engine(options: dict[str, Any]) -> Engine:
    """The engine of `--backbone`/`--adapter`/`--engine`, a conversion's steps on stderr."""
    return build_engine(
        options["backbone"], options["adapters"], options["engine_kind"], steps=steps
    )
