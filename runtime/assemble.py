"""Assembling a runtime node from the CLI's options: engine, policy, registry channel.

The `weact runtime` commands (runtime/cli.py) parse options; these functions turn them into
the running parts: the engine (`--backbone smollm2` is the packaged SmolLM2, converted once),
the policy and agent settings, the registry client of `--channel` (asked before any model
loads) and the ChannelFollower that keeps the node on that channel. Options that cannot make
a node raise `NodeOptionsError`, which the CLI shows as a usage error; progress (a SmolLM2
conversion, a library install) goes to the `steps` callback the CLI passes.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.engine import AdapterSpec, Engine
from runtime.errors import NodeOptionsError
from runtime.settings import get_settings

if TYPE_CHECKING:
    from runtime.progress import Steps

SMOLLM2 = "smollm2"


def build_engine(
    backbone: str,
    adapters: Sequence[tuple[str, Path]],
    kind: str,
    *,
    steps: Steps | None = None,
) -> Engine:
    from runtime.engines import engine_class
    from runtime.lora_tools import DEFAULT_DESCRIPTIONS

    if backbone == SMOLLM2:
        from runtime.models import smollm2_dir

        backbone = str(smollm2_dir(steps=steps))
    elif not Path(backbone).is_dir():
        raise NodeOptionsError(f"{backbone!r} is not a directory", "--backbone")
    specs = [
        AdapterSpec(name, str(path), description=DEFAULT_DESCRIPTIONS.get(name, ""))
        for name, path in adapters
    ]
    settings = get_settings()
    options = {}
    if kind == "vllm":
        options = {
            "max_loras": settings.vllm_max_loras,
            "max_lora_rank": settings.vllm_max_lora_rank,
        }
        if settings.vllm_kv_cache_mib is not None:
            options["kv_cache_memory_bytes"] = settings.vllm_kv_cache_mib * 2**20
    try:
        return engine_class(kind)(backbone, specs, **options)  # type: ignore[no-any-return]
    except ValueError as exc:
        raise NodeOptionsError(str(exc), "--engine") from exc


def make_options_policy(options: dict[str, Any], library: Collection[str]) -> Any:
    """The policy of `--policy/--order/--guess` (and settings) over `library`'s names."""
    from runtime.policy import make_policy, parse_guesses

    settings = get_settings()
    kind = options["policy"] or settings.policy
    order_text = options["order"] or (settings.order if kind == "hard" else None)
    order = [s.strip() for s in order_text.split(",")] if order_text else None
    if options["order"] is None and order is not None:
        order = [n for n in order if n in library]  # default order: what is loaded
    guesses = parse_guesses(options["guesses"]) if options["guesses"] else None
    return make_policy(kind, order, library, guesses, bool(options.get("constrained")))


def check_before_loading(options: dict[str, Any], library: Collection[str], source: str) -> None:
    """Usage errors (exit 2) found from the options alone, before any model is converted or
    loaded: no adapters at all, a policy that does not fit the library's capabilities."""
    from runtime.errors import InvalidPolicyError

    backbone = options["backbone"]
    if backbone != SMOLLM2 and not Path(backbone).is_dir():
        raise NodeOptionsError(f"{backbone!r} is not a directory", "--backbone")
    if not library:
        raise NodeOptionsError(f"no adapters to serve: give {source}")
    try:
        make_options_policy(options, library)
    except InvalidPolicyError as exc:
        raise NodeOptionsError(f"{exc} (capabilities: {', '.join(sorted(library))})") from exc


def episode_setup(engine: Engine, options: dict[str, Any]) -> tuple[Any, Any, list[Any]]:
    """(policy, agent config, external tool targets) from options and settings."""
    from runtime.agent import AgentConfig

    settings = get_settings()
    policy = make_options_policy(options, engine.adapters)
    config = AgentConfig(
        max_steps=options["max_steps"] or settings.max_steps,
        max_new_tokens=options["max_new_tokens"] or settings.max_new_tokens,
    )
    targets: list[Any] = list(options["tool_servers"])
    if options["kb"]:
        from tasks.tools import serve_default_tools

        targets.insert(0, serve_default_tools())
    return policy, config, targets


def close_engine(engine: Engine) -> None:
    """Engines that run processes of their own (vLLM's engine core) stop them here."""
    close = getattr(engine, "close", None)
    if close is not None:
        close()


def check_library_source(options: dict[str, Any], registry_given: bool) -> None:
    """Local adapters or a registry channel, not both; --registry (`registry_given` on the
    command line) only with --channel."""
    if options["channel"] and options["adapters"]:
        raise NodeOptionsError("--adapter and --channel (a registry's library) are exclusive")
    if registry_given and not options["channel"]:
        raise NodeOptionsError("--registry and --channel go together")


def channel_client(options: dict[str, Any]) -> Any:
    """A client of the registry that holds `--channel`, checked before any model loads."""
    from registry.client import RegistryClient

    client = RegistryClient(options["registry"], options["registry_token"])
    try:
        revision = client.get_channel(options["channel"])
        where = f"channel {options['channel']!r} (revision {revision['revision']}) is empty"
        check_before_loading(options, revision["library"], f"another channel: {where}")
    except BaseException:
        client.close()
        raise
    return client


def _trust_root(path: Path | None, state_dir: Path) -> Any:
    """The node's root of trust, verified (signed by its admin threshold) and following the
    rotations the registry serves (kept under `state_dir`), or None."""
    if path is None:
        return None
    from runtime.root_updates import RootChain

    return RootChain.open(path, state_dir / ".weact-trust")


def start_follower(
    engine: Engine, client: Any, options: dict[str, Any], *, steps: Steps | None = None
) -> Any:
    """Serve the channel's current revision and follow it (a started ChannelFollower)."""
    import socket

    from runtime.follow import ChannelFollower

    if not engine.follows_channels:
        raise NodeOptionsError(f"engine {options['engine_kind']!r} cannot follow a channel")
    channel = options["channel"]
    dest = options["library_dir"] or Path.home() / ".cache" / "weact" / "library" / channel
    node_id = options["node_id"] or socket.gethostname()
    follower = ChannelFollower(
        client,
        engine,
        channel,
        node_id,
        dest,
        wait_s=options["poll_wait"],
        heartbeat_s=options["heartbeat"],
        steps=steps,
        trust=_trust_root(options.get("trust_root"), Path(dest)),
    )
    follower.start()
    return follower
