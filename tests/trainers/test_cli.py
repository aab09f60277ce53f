"""The trainers' commands through the `weact` dispatcher."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import app
from trainers.tasks import generate
from trainers.trajectory import write_trajectories


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_trajectories(tmp_path_factory.mktemp("cli") / "t.jsonl", generate(2, seed=4))


def test_inspect_json_matches_the_samples(data, tiny_backbone, tokenizer) -> None:
    from trainers.phases import build_samples
    from trainers.trajectory import read_trajectories

    result = CliRunner().invoke(
        app, ["data", "inspect", str(data), "--backbone", str(tiny_backbone), "--json"]
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in result.output.splitlines()]
    expected = [s.to_json() for s in build_samples(read_trajectories(data), tokenizer)]
    assert lines == expected
    assert [x["capability"] for x in lines] == ["plan", "search", "write"] * 2


def test_inspect_dims_unsupervised_tokens(data, tiny_backbone) -> None:
    result = CliRunner().invoke(
        app,
        ["data", "inspect", str(data), "--backbone", str(tiny_backbone), "--capability", "plan"],
        env={"FORCE_COLOR": "1", "NO_COLOR": None, "TERM": "xterm"},
    )
    assert result.exit_code == 0, result.output
    assert "\x1b[2m" in result.output  # dim
    assert "\x1b[1m" in result.output  # bold: supervised
    assert result.output.count("· plan ·") == 2


def test_generate_writes_jsonl(tmp_path) -> None:
    out = tmp_path / "g.jsonl"
    result = CliRunner().invoke(
        app, ["data", "generate", str(out), "--n", "3", "--phases", "plan,code"]
    )
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "--data", "X"], "missing --capability"),
        (
            "train --capability plan --per-trajectory --data X --backbone . --out o".split(),
            "--per-trajectory goes with --shared",
        ),
        (
            "train --shared --per-trajectory --sequential --data X --backbone . --out o".split(),
            "steps of whole trajectories mix capabilities",
        ),
        (["merge", "--method", "ties", "--adapter", "DIR", "--out", "o"], "no adapter_config.json"),
        (["merge", "--method", "tspa", "--adapter", "DIR", "--out", "o"], "'tspa' is not one of"),
        (
            ["eval", "nll", "--backbone", ".", "--data", "X", "--adapter", "nodir"],
            "expected NAME=DIR",
        ),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path, data, args, message) -> None:
    args = [str(data) if a == "X" else a for a in args]
    result = CliRunner().invoke(app, args)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_eval_nll_uses_each_capability_s_adapter_or_the_bare_backbone(
    data, tiny_backbone, tmp_path
) -> None:
    from runtime.tiny import build_tiny_adapter

    plan = build_tiny_adapter(tiny_backbone, tmp_path / "plan", seed=3)
    base = ["eval", "nll", "--backbone", str(tiny_backbone), "--data", str(data), "--json"]
    runner = CliRunner()
    bare = {x["capability"]: x for x in json.loads(runner.invoke(app, base).output)}
    mixed = {
        x["capability"]: x
        for x in json.loads(runner.invoke(app, [*base, "--adapter", f"plan={plan}"]).output)
    }
    merged = json.loads(runner.invoke(app, [*base, "--adapter", f"*={plan}"]).output)
    assert mixed["search"]["nll"] == bare["search"]["nll"]
    assert mixed["write"] == bare["write"]
    assert mixed["plan"]["nll"] != bare["plan"]["nll"]
    assert mixed["plan"]["adapter"] == str(plan)
    assert [x["nll"] for x in merged][0] == mixed["plan"]["nll"]
    assert all(x["adapter"] == str(plan) for x in merged)


def test_merge_progress_goes_to_stderr_and_json_stdout_stays_one_document(
    tiny_backbone: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forced with `WEACT_PROGRESS=1` (CliRunner's stderr is no terminal): a line per step on
    stderr, and stdout is the `--json` result alone; unforced, stderr stays empty."""
    import re

    from runtime.tiny import build_tiny_adapter

    a = build_tiny_adapter(tiny_backbone, tmp_path / "a", seed=1)
    b = build_tiny_adapter(tiny_backbone, tmp_path / "b", seed=2)
    args = ["merge", "--method", "ties", "--adapter", str(a), "--adapter", str(b), "--json"]
    runner = CliRunner()
    monkeypatch.setenv("WEACT_PROGRESS", "1")
    out = tmp_path / "forced"
    forced = runner.invoke(app, [*args, "--out", str(out)])
    assert forced.exit_code == 0, forced.output
    assert json.loads(forced.stdout) == {
        "method": "ties",
        "adapters": [str(a), str(b)],
        "out": str(out),
    }
    *timed, done = forced.stderr.splitlines()
    lines = [re.sub(r" \((\d+\.\d s)(, ETA \d+\.\d s)?\)$", "", line) for line in timed]
    assert all(", ETA " in line for line in timed[1:])
    assert lines == [
        f"merge ties: step 1/4 read {a}",
        f"merge ties: step 2/4 read {b}",
        "merge ties: step 3/4 merge 2 adapters",
        f"merge ties: step 4/4 write {out}",
    ]
    assert re.fullmatch(r"merge ties: done in \d+\.\d s", done)
    monkeypatch.delenv("WEACT_PROGRESS")
    quiet = runner.invoke(app, [*args, "--out", str(tmp_path / "quiet")])
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stderr == ""
    assert json.loads(quiet.stdout)["out"] == str(tmp_path / "quiet")


def test_a_shared_baseline_in_steps_of_whole_trajectories(data, tiny_backbone, tmp_path) -> None:
    out = tmp_path / "shared"
    args = ["train", "--shared", "--per-trajectory", "--epochs", "2", "--data", str(data),
            "--backbone", str(tiny_backbone), "--out", str(out), "--json"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)["losses"]) == 4  # two trajectories, two epochs
    record = json.loads((out / "training.json").read_text())
    assert record["settings"]["per_trajectory"] is True
    assert record["steps"] == 4
