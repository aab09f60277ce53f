"""The CI recipe (docs/ci/weact-gate.yml) cannot rot: every `weact` command it calls exists.

The workflow's `run:` scripts are read from the YAML; each `weact ...` invocation in them is
resolved through the click groups of `cli.main` to a command, each `--option` it passes must
be one of that command's options, and the command's `--help` must answer. The recipe must
also still do what it is for: evaluate (`eval run --post`) and ask the gate with an exit
status that fails the job, from the registry URL and an evaluator token in secrets.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner

from cli.main import app

RECIPE = Path(__file__).resolve().parents[1] / "docs" / "ci" / "weact-gate.yml"
# `weact` as a command word, and its arguments up to the end of that simple command.
INVOCATION = re.compile(r"(?:^|[\s;(|&])weact((?:\s+[^|;)&<>\s]+)*)")


def _workflow() -> dict[Any, Any]:
    loaded = yaml.safe_load(RECIPE.read_text())
    assert isinstance(loaded, dict)
    return loaded


def _scripts() -> list[str]:
    return [
        step["run"]
        for job in _workflow()["jobs"].values()
        for step in job["steps"]
        if "run" in step
    ]


def _invocations() -> list[list[str]]:
    """Every `weact` call of the scripts, as its argument words (continuations joined)."""
    calls = []
    for script in _scripts():
        for line in script.replace("\\\n", " ").splitlines():
            if line.strip().startswith("#"):
                continue
            calls.extend(shlex.split(m.group(1)) for m in INVOCATION.finditer(line))
    return calls


def _resolve(words: list[str]) -> tuple[list[str], click.Command, list[str]]:
    """The command path the words name, its click command, and the options passed to it."""
    command: click.Command = app
    path: list[str] = []
    options = []
    for word in words:
        if word.startswith("-"):
            options.append(word.split("=", 1)[0])
        elif isinstance(command, click.Group) and not options:
            with click.Context(command) as ctx:
                sub = command.get_command(ctx, word)
            assert sub is not None, f"`weact {' '.join([*path, word])}` is not a command"
            assert not sub.hidden, f"`weact {' '.join([*path, word])}` is an old spelling"
            command, path = sub, [*path, word]
    return path, command, options


def _option_names(command: click.Command) -> set[str]:
    with click.Context(command) as ctx:
        params = command.get_params(ctx)
    return {name for p in params for name in (*p.opts, *p.secondary_opts)}


CALLS = _invocations()


def test_the_recipe_calls_weact() -> None:
    paths = {" ".join(_resolve(words)[0]) for words in CALLS}
    assert {"suite generate", "channel show", "adapter pull", "eval run", "channel gate"} <= paths


@pytest.mark.parametrize("words", CALLS, ids=[" ".join(w[:2]) for w in CALLS])
def test_each_call_names_a_command_and_its_options(words: list[str]) -> None:
    path, command, options = _resolve(words)
    unknown = set(options) - _option_names(command)
    assert not unknown, f"`weact {' '.join(path)}` has no option {sorted(unknown)}"
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Usage: {app.name or 'app'} {' '.join(path)}".rstrip())


def test_the_gate_decides_the_job() -> None:
    """Evaluations are posted, and the last gate call's exit status is not swallowed."""
    runs = [words for words in CALLS if _resolve(words)[0] == ["eval", "run"]]
    assert runs
    assert all("--post" in words for words in runs)
    script = next(s for s in _scripts() if "weact eval run" in s)
    lines = [line.strip() for line in script.splitlines()]
    gate_lines = [line for line in lines if line.startswith("weact channel gate")]
    verdict = gate_lines[-1]
    assert "||" not in verdict, verdict
    assert "--json" not in verdict, verdict
    assert "set -euo pipefail" in script


def test_it_runs_on_pull_requests_from_secrets_and_never_on_this_repository() -> None:
    workflow = _workflow()
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads `on` as true
    assert set(triggers) == {"pull_request"}
    assert workflow["env"]["WEACT_URL"] == "${{ secrets.WEACT_URL }}"
    assert workflow["env"]["WEACT_TOKEN"] == "${{ secrets.WEACT_TOKEN }}"
    assert RECIPE.parent.relative_to(RECIPE.parents[2]) == Path("docs/ci")
    assert not (RECIPE.parents[2] / ".github" / "workflows" / RECIPE.name).exists()
