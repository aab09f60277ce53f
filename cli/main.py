"""Mounts each package's commands lazily, so `weact --help` imports no torch.

Each entry maps a command name to `module:attribute` of a click command or group; the
module is imported only when that command runs (or its own --help is shown).
"""

from __future__ import annotations

import difflib
import importlib
import sys

import click
from click.shell_completion import CompletionItem

from clikit.options import hidden_alias

COMMANDS: dict[str, tuple[str, str]] = {
    # name: (module:attribute, one-line help shown by `weact --help`)
    "manifest": ("storage.cli:manifest", "Print the manifest root of safetensors files."),
    "serve": ("registry.cli.server:serve", "Run the registry service."),
    "db": ("registry.cli.server:db", "Database migrations."),
    "token": ("registry.cli.tokens:token", "Create, list and revoke API tokens."),
    "backbone": ("registry.cli.catalog:backbone", "Register and show backbones."),
    "capability": ("registry.cli.catalog:capability", "Create and list capabilities."),
    "adapter": (
        "registry.cli.adapters:adapter",
        "Adapter versions: push, pull, approve, reject, revoke, tag, verify, show, list.",
    ),
    "channel": (
        "registry.cli.channels:channel",
        "Channels: promote, rollback, gate, require, sign, show, list, revisions.",
    ),
    "key": ("registry.cli.trust:key", "Create signing key pairs (signed trust)."),
    "root": ("registry.cli.trust:root", "Edit and sign the offline root of trust."),
    "audit": ("registry.cli.audit:audit", "Verify the event chain."),
    "fsck": ("registry.cli.maintenance:fsck", "Check blobs, roots, channel heads, events."),
    "gc": ("registry.cli.maintenance:gc", "Delete unreferenced blobs and stale temp files."),
    "nodes": ("registry.cli.nodes:nodes", "List runtime nodes: revision vs head, lag, stale."),
    "runtime": ("runtime.cli:runtime", "Serve or run the WeAct runtime."),
    "train": ("trainers.cli:train", "Train one capability's LoRA adapter (or a baseline)."),
    "data": ("trainers.data_cli:data", "Training data: generate and inspect."),
    "merge": ("trainers.cli:merge", "Static-merge baselines."),
    "eval": ("evals.cli:eval_", "Evaluations: list them, masked NLL of adapters."),
    "suite": ("evals.cli:suite", "Generate and verify offline benchmark suites."),
    "benchmark": ("evals.registry_cli:benchmark", "Define and list benchmarks in the registry."),
    "demo": ("cli.demo:demo", "Run the end-to-end demo on embedded defaults."),
}

# Old spellings, kept one release: they still run (after a note on stderr naming the new
# one) and `weact --help` no longer lists them. Each maps to the command path it became.
HIDDEN_ALIASES: dict[str, tuple[str, ...]] = {
    "bench": ("suite",),
    "approve": ("adapter", "approve"),
    "reject": ("adapter", "reject"),
    "revoke": ("adapter", "revoke"),
    "verify": ("adapter", "verify"),
    "promote": ("channel", "promote"),
    "rollback": ("channel", "rollback"),
    "gate": ("channel", "gate"),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in HIDDEN_ALIASES:
            return self._alias(ctx, HIDDEN_ALIASES[cmd_name])
        if cmd_name not in COMMANDS:
            return None
        target, _ = COMMANDS[cmd_name]
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise click.ClickException(
                f"`weact {cmd_name}` needs an optional dependency ({exc.name}): "
                "install with `pip install 'weact[runtime]'`"
            ) from exc
        return getattr(module, attr)  # type: ignore[no-any-return]

    def _alias(self, ctx: click.Context, path: tuple[str, ...]) -> click.Command | None:
        command = self.get_command(ctx, path[0])
        for name in path[1:]:
            assert isinstance(command, click.Group), path
            command = command.get_command(ctx, name)
        return None if command is None else hidden_alias(command, f"weact {' '.join(path)}")

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """An unknown command is a usage error that offers the closest one."""
        name = args[0] if args else ""
        if args and not name.startswith("-") and self.get_command(ctx, name) is None:
            close = difflib.get_close_matches(name, [*COMMANDS, *HIDDEN_ALIASES], n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            ctx.fail(f"No such command {name!r}.{hint} (`weact --help` lists them)")
        return super().resolve_command(ctx, args)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        """Command names from `COMMANDS`, importing none of them (click's own completion
        imports every command for its help: seconds per TAB)."""
        names = [
            CompletionItem(name, help=help)
            for name, (_, help) in sorted(COMMANDS.items())
            if name.startswith(incomplete)
        ]
        return names + click.Command.shell_complete(self, ctx, incomplete)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup)
@click.version_option(package_name="weact")
def app() -> None:
    """WeAct adapter registry, runtime and trainers."""


def main() -> None:
    sys.exit(app.main(standalone_mode=True))
