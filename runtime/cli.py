"""`weact runtime` commands (mounted lazily by cli/main.py).

    weact runtime serve --backbone PATH --adapter NAME=DIR [...] [--policy hard|soft]
                        [--order plan,search,write] [--host H] [--port P] [--token T]
    weact runtime serve --backbone PATH --registry URL --channel prod [--node-id ID]
                        [--registry-token T] [--library-dir DIR] [--poll-wait S]
    weact runtime run   --task "..." --backbone PATH --adapter NAME=DIR [...] [--json]
    weact runtime mcp   --backbone PATH --adapter NAME=DIR [...]      (MCP over stdio)

`--backbone smollm2` selects the packaged SmolLM2-135M-Instruct (converted once, cached).
Defaults come from `WEACT_RUNTIME_*` (see runtime/settings.py); the token also from
`WEACT_RUNTIME_TOKEN`, the registry token from `WEACT_TOKEN`. With `--registry` the library
is the channel's current revision, kept current by `runtime.follow.ChannelFollower`
(exclusive with `--adapter`). The built-in knowledge-base `search` tool is offered unless
`--no-kb`; `--tool-server URL` adds external MCP tool servers (streamable HTTP).
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

from runtime.engine import AdapterSpec, Engine
from runtime.errors import RuntimeEngineError
from runtime.settings import get_settings

F = TypeVar("F", bound=Callable[..., Any])
SMOLLM2 = "smollm2"


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
        click.option("--max-steps", type=click.IntRange(min=1), default=None),
        click.option("--max-new-tokens", type=click.IntRange(min=1), default=None),
        click.option("--kb/--no-kb", default=True, help="Offer the built-in search tool."),
        click.option("--tool-server", "tool_servers", multiple=True, metavar="URL"),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def follow_options(fn: F) -> F:
    """Options of a node that follows a registry channel instead of local adapters."""
    options = [
        click.option("--registry", default=None, metavar="URL", help="Follow this registry."),
        click.option("--channel", default=None, help="The channel to follow, e.g. prod."),
        click.option("--node-id", default=None, help="Node id in heartbeats (default hostname)."),
        click.option("--registry-token", envvar="WEACT_TOKEN", default=None, help="Node token."),
        click.option(
            "--library-dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            help="Where pulled adapters go (default ~/.cache/weact/library/CHANNEL).",
        ),
        click.option(
            "--poll-wait",
            type=click.FloatRange(min=0.1, max=600),
            default=30.0,
            show_default=True,
            help="Seconds each long-poll of the channel waits.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def runtime_errors(fn: F) -> F:
    """Typed runtime errors become one line on stderr and exit 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RuntimeEngineError as exc:
            raise click.ClickException(str(exc)) from exc

    return wrapper  # type: ignore[return-value]


def build_engine(backbone: str, adapters: Sequence[tuple[str, Path]], kind: str) -> Engine:
    from runtime.engines import engine_class
    from runtime.tools import DEFAULT_DESCRIPTIONS

    if backbone == SMOLLM2:
        from runtime.models import smollm2_dir

        backbone = str(smollm2_dir())
    elif not Path(backbone).is_dir():
        raise click.BadParameter(f"{backbone!r} is not a directory", param_hint="--backbone")
    specs = [
        AdapterSpec(name, str(path), description=DEFAULT_DESCRIPTIONS.get(name, ""))
        for name, path in adapters
    ]
    try:
        return engine_class(kind)(backbone, specs)  # type: ignore[no-any-return]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--engine") from exc


def episode_setup(engine: Engine, options: dict[str, Any]) -> tuple[Any, Any, list[Any]]:
    """(policy, agent config, external tool targets) from options and settings."""
    from runtime.agent import AgentConfig
    from runtime.policy import make_policy, parse_guesses

    settings = get_settings()
    kind = options["policy"] or settings.policy
    order_text = options["order"] or (settings.order if kind == "hard" else None)
    order = [s.strip() for s in order_text.split(",")] if order_text else None
    if options["order"] is None and order is not None:
        order = [n for n in order if n in engine.adapters]  # default order: what is loaded
    guesses = parse_guesses(options["guesses"]) if options["guesses"] else None
    policy = make_policy(kind, order, engine.adapters, guesses)
    config = AgentConfig(
        max_steps=options["max_steps"] or settings.max_steps,
        max_new_tokens=options["max_new_tokens"] or settings.max_new_tokens,
    )
    targets: list[Any] = list(options["tool_servers"])
    if options["kb"]:
        from runtime.kb import serve_search_tool

        targets.insert(0, serve_search_tool())
    return policy, config, targets


@click.group(name="runtime")
def runtime() -> None:
    """Serve or run the WeAct runtime: resident adapters switched by load_lora/offload_lora."""


@runtime.command()
@engine_options
@click.option("--host", default=None, help="Bind address (default 127.0.0.1).")
@click.option("--port", type=click.IntRange(0, 65535), default=None)
@click.option("--token", envvar="WEACT_RUNTIME_TOKEN", default=None, help="Bearer token.")
@follow_options
@runtime_errors
def serve(host: str | None, port: int | None, token: str | None, **options: Any) -> None:
    """Serve the runtime HTTP API, with MCP at /mcp."""
    import uvicorn

    from runtime.server import create_app

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = get_settings()
    check_library_source(options)
    engine = build_engine(options["backbone"], options["adapters"], options["engine_kind"])
    follower = start_follower(engine, options) if options["registry"] else None
    policy, config, targets = episode_setup(engine, options)
    host = host or settings.host
    secret = token or (settings.token.get_secret_value() if settings.token else None)
    app = create_app(
        engine,
        policy=policy,
        agent_config=config,
        tool_servers=targets,
        token=secret,
        host=host,
        max_episodes=settings.max_episodes,
    )
    # uvicorn re-raises SIGTERM after its graceful shutdown: with the default handler the
    # process would die right there, before the engine is closed (vLLM's engine core would
    # outlive the node). Raising SystemExit instead runs the cleanup below.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        uvicorn.run(app, host=host, port=port if port is not None else settings.port)
    finally:
        if follower is not None:
            follower.stop()
            follower.client.close()
        close_engine(engine)


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def close_engine(engine: Engine) -> None:
    """Engines that run processes of their own (vLLM's engine core) stop them here."""
    close = getattr(engine, "close", None)
    if close is not None:
        close()


def check_library_source(options: dict[str, Any]) -> None:
    """Local adapters or a registry channel, not both; --registry and --channel together."""
    if options["registry"] and options["adapters"]:
        raise click.UsageError("--adapter and --registry are exclusive")
    if bool(options["registry"]) != bool(options["channel"]):
        raise click.UsageError("--registry and --channel go together")


def start_follower(engine: Engine, options: dict[str, Any]) -> Any:
    """Serve the channel's current revision and follow it (a started ChannelFollower)."""
    import socket

    from registry.client import RegistryClient
    from runtime.follow import SYNC_ERRORS, ChannelFollower

    if not hasattr(engine, "swap_adapters"):
        raise click.UsageError(f"engine {options['engine_kind']!r} cannot follow a channel")
    channel = options["channel"]
    dest = options["library_dir"] or Path.home() / ".cache" / "weact" / "library" / channel
    client = RegistryClient(options["registry"], options["registry_token"])
    node_id = options["node_id"] or socket.gethostname()
    follower = ChannelFollower(
        client,
        engine,  # type: ignore[arg-type]
        channel,
        node_id,
        dest,
        wait_s=options["poll_wait"],
    )
    try:
        follower.start()
    except SYNC_ERRORS as exc:
        client.close()
        if isinstance(exc, RuntimeEngineError):
            raise
        raise click.ClickException(f"cannot follow {channel!r}: {exc}") from exc
    return follower


@runtime.command()
@click.option("--task", required=True, help="What the agent should do.")
@engine_options
@click.option("--json", "as_json", is_flag=True, help="Print the trajectory as JSON.")
@runtime_errors
def run(task: str, as_json: bool, **options: Any) -> None:
    """Run one episode in-process and print its trajectory."""
    engine = build_engine(options["backbone"], options["adapters"], options["engine_kind"])
    try:
        policy, config, targets = episode_setup(engine, options)
        episode = _run_episode(engine, policy, config, targets, task)
    finally:
        close_engine(engine)
    if as_json:
        click.echo(json.dumps(episode.to_json(), indent=2))
    else:
        _print_trajectory(episode)
    if episode.status != "done":
        raise click.ClickException(f"episode failed: {episode.error}")


@runtime.command()
@engine_options
@runtime_errors
def mcp(**options: Any) -> None:
    """Serve load_lora / offload_lora over MCP stdio (one client, one episode)."""
    from runtime.episode import EpisodeManager
    from runtime.tools import build_mcp_server

    engine = build_engine(options["backbone"], options["adapters"], options["engine_kind"])
    try:
        policy, _, _ = episode_setup(engine, options)
        build_mcp_server(EpisodeManager(engine, policy=policy), stdio=True).run("stdio")
    finally:
        close_engine(engine)


def _run_episode(engine: Engine, policy: Any, config: Any, targets: list[Any], task: str) -> Any:
    import anyio

    from runtime.agent import Agent
    from runtime.episode import EpisodeManager
    from runtime.tools import McpToolbox

    episode = EpisodeManager(engine, policy=policy).create(task=task)

    async def main() -> None:
        async with McpToolbox(targets) as toolbox:
            await Agent(engine.tokenizer, toolbox, config).run(episode, task)

    anyio.run(main)
    return episode


def _print_trajectory(episode: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"episode {episode.id} ({episode.policy.kind})")
    for column in ("step", "active", "prefilled", "hit", "decoded", "rebuild ms", "switch ms"):
        table.add_column(column, justify="right")
    table.add_column("tool calls")
    for s in episode.steps:
        table.add_row(
            str(s.step),
            str(s.active or "-"),
            str(s.prefilled),
            str(s.cache_hit),
            str(s.decoded),
            f"{s.rebuild_s * 1e3:.1f}",
            f"{s.switch_s * 1e3:.2f}",
            ", ".join(s.tool_calls) + (" (runtime)" if s.forced else ""),
        )
    console = Console()
    console.print(table)
    t = episode.to_json()["totals"]
    console.print(
        f"finish: {episode.finish_reason}  elapsed: {episode.elapsed_s:.2f}s  "
        f"switch share: {t['switch_share']:.1%}  rebuild share: {t['rebuild_share']:.1%}"
    )
    console.print(f"answer: {episode.answer!r}")
