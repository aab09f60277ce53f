"""`--json` on every `weact` command that prints a result.

The commands are walked from the click tree of `weact --help` (every group, every
subcommand, lazily mounted ones included); each must take `--json` unless it is listed in
`NO_RESULT` with the reason it prints no result of its own.
"""

from __future__ import annotations

import click

from cli.main import app

NO_RESULT = {
    "serve": "serves the registry until stopped; it prints only logs",
    "runtime serve": "serves the runtime until stopped; it prints only logs",
    "runtime mcp": "stdout is the MCP protocol stream (stdio transport)",
}


def result_commands() -> dict[str, click.Command]:
    """Every runnable command by its path ("adapter push", "train", ...)."""
    ctx = click.Context(app)
    found: dict[str, click.Command] = {}

    def walk(path: str, command: click.Command) -> None:
        if command.hidden:  # an old spelling: tests/test_cli_aliases.py
            return
        group = isinstance(command, click.Group)
        if not group or command.invoke_without_command:
            found[path] = command
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, f"{path} {name}"
                walk(f"{path} {name}", sub)

    for name in app.list_commands(ctx):
        command = app.get_command(ctx, name)
        assert command is not None, name
        walk(name, command)
    return found


def takes_json(command: click.Command) -> bool:
    return any("--json" in getattr(param, "opts", ()) for param in command.params)


def test_every_command_that_prints_a_result_takes_json() -> None:
    commands = result_commands()
    assert set(NO_RESULT) <= set(commands), "an allow-listed command is gone"
    missing = sorted(p for p, c in commands.items() if p not in NO_RESULT and not takes_json(c))
    assert missing == [], f"these commands print a result but take no --json: {missing}"
    listed = sorted(p for p in NO_RESULT if takes_json(commands[p]))
    assert listed == [], f"these take --json now: drop them from NO_RESULT: {listed}"


def test_the_walk_sees_the_whole_tree() -> None:
    commands = result_commands()
    for path in ("token list", "token revoke", "adapter push", "train", "data generate", "demo"):
        assert path in commands
    assert len(commands) > 40


def test_json_results_parse(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A few of the commands that gained --json: stdout is one JSON document."""
    import json

    from click.testing import CliRunner

    runner = CliRunner()
    out = tmp_path / "data.jsonl"
    made = runner.invoke(app, ["data", "generate", str(out), "--n", "2", "--json"])
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout) == {
        "out": str(out),
        "count": 2,
        "phases": ["plan", "search", "write"],
        "seed": 0,
    }
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    upgraded = runner.invoke(app, ["db", "upgrade", "--database-url", url, "--json"])
    assert upgraded.exit_code == 0, upgraded.output
    assert json.loads(upgraded.stdout) == {"database": url, "at_head": True}
