"""The CLI's old spellings, kept one release: each still runs the command it became,
says so on stderr, and `--help` no longer shows it (docs/cli.md, "Old spellings")."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.main import HIDDEN_ALIASES, app

OLD_COMMANDS = {
    # old spelling: (new spelling, arguments a run takes)
    "approve": ("adapter approve", ["write@1"]),
    "reject": ("adapter reject", ["write@1"]),
    "revoke": ("adapter revoke", ["write@1", "--reason", "r"]),
    "promote": ("channel promote", ["prod", "--adapter", "write=1"]),
    "rollback": ("channel rollback", ["prod", "--to", "1"]),
    "gate": ("channel gate", ["prod", "--adapter", "write=1"]),
}
"""Registry commands: run against a registry that refuses connections, the old spelling
fails exactly as the new one (same exit code, same error line) after its note."""


@pytest.fixture(scope="module")
def closed_url() -> Iterator[str]:
    with socket.socket() as sock:  # bound, not listening: every connection is refused
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"WEACT_TOKEN": "t", "COLUMNS": "200"})


def test_every_old_command_spelling_is_tested() -> None:
    assert set(HIDDEN_ALIASES) == {*OLD_COMMANDS, "bench", "verify"}


@pytest.mark.parametrize("old", sorted(HIDDEN_ALIASES))
def test_an_old_command_is_hidden_from_help(old: str) -> None:
    top = invoke("--help")
    assert top.exit_code == 0
    rows = top.stdout.split("Commands:")[1].splitlines()
    listed = {row.split()[0] for row in rows if row.startswith("  ") and row[2] != " "}
    assert old not in listed
    assert " ".join(HIDDEN_ALIASES[old]).split()[0] in listed
    assert invoke(old, "--help").exit_code == 0


@pytest.mark.parametrize("old", sorted(OLD_COMMANDS))
def test_an_old_registry_command_runs_the_new_one(old: str, closed_url: str) -> None:
    new, args = OLD_COMMANDS[old]
    by_new = invoke(*new.split(), *args, "--registry", closed_url)
    by_old = invoke(old, *args, "--url", closed_url)
    assert by_new.exit_code == by_old.exit_code != 0
    note, *rest = by_old.stderr.splitlines()
    assert note == f"Note: this spelling is deprecated, use `weact {new}`"
    assert rest == by_new.stderr.splitlines()
    assert "cannot reach the registry" in by_new.stderr


def test_verify_and_bench_still_run(tmp_path: Path) -> None:
    made = invoke(
        "bench",
        "generate",
        "--train",
        "1",
        "--dev",
        "1",
        "--test",
        "1",
        "--out",
        str(tmp_path / "s"),
        "--json",
    )
    assert made.exit_code == 0, made.output
    assert made.stderr.startswith("Note: this spelling is deprecated, use `weact suite`")
    checked = invoke("bench", "verify", str(tmp_path / "s"), "--json")
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.stdout) == json.loads(
        invoke("suite", "verify", str(tmp_path / "s"), "--json").stdout
    )
    (tmp_path / "root.json").write_text("{}")
    args = (str(tmp_path), "--root", str(tmp_path / "root.json"))
    old, new = invoke("verify", *args), invoke("adapter", "verify", *args)
    assert old.exit_code == new.exit_code == 1
    assert old.stderr.splitlines()[1:] == new.stderr.splitlines()


def test_old_train_subcommands_run_their_new_spelling(tmp_path: Path) -> None:
    old = invoke("train", "generate", str(tmp_path / "a.jsonl"), "--n", "2", "--json")
    new = invoke("data", "generate", str(tmp_path / "b.jsonl"), "--n", "2", "--json")
    assert old.exit_code == new.exit_code == 0, old.output
    assert old.stderr.startswith("Note: this spelling is deprecated, use `weact data generate`")
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text()
    helped = invoke("train", "--help")
    assert helped.exit_code == 0
    assert "Commands:" not in helped.stdout
    assert "Usage: app train [OPTIONS]\n" in helped.stdout
    assert "publish" in invoke("train", "publish", "--help").stdout


@pytest.mark.parametrize(
    ("command", "new", "old"),
    [("channel list", "--registry", "--url"), ("runtime serve", "--client-token", "--token")],
)
def test_an_old_option_spelling_parses_but_is_hidden(command: str, new: str, old: str) -> None:
    helped = invoke(*command.split(), "--help").stdout
    assert new in helped
    assert f"{old} " not in helped
    assert f"{old}," not in helped
    from cli.main import app as root

    ctx = root.make_context("weact", [], resilient_parsing=True)
    leaf = root
    for name in command.split():
        leaf = leaf.get_command(ctx, name)  # type: ignore[attr-defined]
    (param,) = [p for p in leaf.params if new in p.opts]
    assert old in param.opts
