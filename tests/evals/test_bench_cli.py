"""`weact suite` (and its old name `weact bench`), `weact benchmark`, `weact eval list`, run
as a user runs them (subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from support.serving import registry_in_process

from evals.manifest import verified_manifest
from registry.launcher import weact_command
from tasks.questions import KINDS

SIZES = ("--train", "2", "--dev", "1", "--test", "3")


def _weact(
    *args: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*weact_command(), *map(str, args)],
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_suite_generate_and_verify(tmp_path: Path) -> None:
    made = _weact("suite", "generate", "--seed", "5", "--out", tmp_path / "s", *SIZES, "--json")
    assert made.returncode == 0, made.stderr
    summary = json.loads(made.stdout)
    assert summary["digest"] == verified_manifest(tmp_path / "s")["digest"]
    assert summary["questions"]["test"] == dict.fromkeys(KINDS, 3)
    again = _weact("suite", "generate", "--seed", "5", "--out", tmp_path / "s", *SIZES)
    assert again.returncode == 1
    assert "is not empty" in again.stderr
    (tmp_path / "s" / "kb.jsonl").write_text("{}\n")
    broken = _weact("suite", "verify", tmp_path / "s")
    assert broken.returncode == 1
    assert "differs from the manifest" in broken.stderr
    assert "Traceback" not in broken.stderr


def test_benchmark_create_list_and_eval_list(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    # the old spelling still runs; help lists only the new one
    assert _weact("bench", "generate", "--out", suite, *SIZES).returncode == 0
    listed = _weact("--help").stdout.split()
    assert "suite" in listed
    assert "bench" not in listed
    digest = verified_manifest(suite)["digest"]
    with registry_in_process(tmp_path) as registry:
        db = ("--database-url", registry.database_url, "--json")
        token = json.loads(
            _weact("token", "create", "--name", "bob", "--role", "approver", *db).stdout
        )["token"]
        env = {"WEACT_URL": registry.url, "WEACT_TOKEN": token}
        created = _weact(
            "benchmark", "create", "research-f1", "--suite", suite, "--metric", "f1", "--json",
            env=env,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        body = json.loads(created.stdout)
        assert (body["dataset_digest"], body["direction"], body["scope"]) == (
            digest, "higher", "library",
        )  # fmt: skip
        nll = _weact(
            "benchmark", "create", "write-nll", "--dataset-digest", "b" * 64,
            "--metric", "nll", "--scope", "nope", env=env,
        )  # fmt: skip
        assert nll.returncode == 1
        assert "not_found" in nll.stderr
        listed = _weact("benchmark", "list", env=env)
        assert "research-f1" in listed.stdout
        assert json.loads(_weact("eval", "list", "--json", env=env).stdout) == []
        both = _weact("benchmark", "create", "x", "--metric", "em", env=env)
        assert both.returncode == 2
        assert "exactly one of --suite" in both.stderr
