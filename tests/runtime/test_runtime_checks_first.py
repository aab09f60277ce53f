"""`weact runtime` checks its arguments before any expensive step: no adapter, or a policy
that does not fit the adapters, is a usage error (exit 2) before the backbone is converted
or loaded (here: the conversion and the engine would fail the test if reached)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.main import app


@pytest.fixture
def nothing_expensive(monkeypatch: pytest.MonkeyPatch) -> None:
    import runtime.cli
    import runtime.models

    def expensive(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an expensive step ran before the arguments were checked")

    monkeypatch.setattr(runtime.models, "smollm2_dir", expensive)
    monkeypatch.setattr(runtime.cli, "build_engine", expensive)


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["runtime", *args], catch_exceptions=False)


@pytest.mark.parametrize("command", [["run", "--task", "hi"], ["mcp"], ["serve"]])
def test_no_adapter_fails_before_the_model_converts(
    nothing_expensive: None, command: list[str]
) -> None:
    result = invoke(*command, "--backbone", "smollm2")
    assert result.exit_code == 2, result.output
    assert "no adapters to serve: give --adapter NAME=DIR" in result.output


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--order", "plan,nope"], "nope"),
        (["--policy", "soft", "--order", "plan"], "an order applies to the hard policy only"),
        (["--policy", "hard", "--guess", "plan=plan"], "soft policy only"),
    ],
)
def test_a_policy_that_does_not_fit_fails_before_loading(
    nothing_expensive: None, tmp_path: Path, extra: list[str], message: str
) -> None:
    (tmp_path / "plan").mkdir()
    args = ["--backbone", "smollm2", "--adapter", f"plan={tmp_path / 'plan'}", *extra]
    result = invoke("run", "--task", "hi", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
