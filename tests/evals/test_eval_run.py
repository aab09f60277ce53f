"""`weact eval run` on the tiny model end to end: suite -> episodes -> scores -> the registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.serving import registry_in_process

from cli.main import app
from evals.suite import Suite
from registry.client import RegistryClient
from tasks.trajectories import CAPABILITIES


@pytest.fixture(scope="module")
def tiny_library(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    from runtime.tiny import build_tiny_adapter, build_tiny_backbone

    root = tmp_path_factory.mktemp("tiny-lib")
    backbone = build_tiny_backbone(root / "backbone")
    return backbone, {
        c: build_tiny_adapter(backbone, root / c, seed=i + 3) for i, c in enumerate(CAPABILITIES)
    }


def test_eval_run_posts_per_item_scores_with_the_suite_digest(
    tiny_library: tuple[Path, dict[str, Path]], small_suite: Suite, suite_dir: Path, tmp_path: Path
) -> None:
    backbone, adapters = tiny_library
    with registry_in_process(tmp_path) as registry:
        admin_token = _token(registry.database_url, "root", "admin")
        evaluator = _token(registry.database_url, "ci", "evaluator")
        admin = RegistryClient(registry.url, admin_token)
        for name in ("research-em", "research-recall"):
            admin.create_benchmark(
                name=name, version=1, dataset_digest=small_suite.digest, scope="library",
                metric="em" if name.endswith("em") else "doc_recall", direction="higher",
                tolerance=0.02,
            )  # fmt: skip
        digest = "e" * 64
        args = [
            "eval", "run", "--suite", str(suite_dir), "--backbone", str(backbone),
            *(x for c, p in adapters.items() for x in ("--adapter", f"{c}={p}")),
            "--results", str(tmp_path / "results.jsonl"), "--limit", "4",
            "--max-new-tokens", "6", "--max-steps", "6", "--max-episode-tokens", "10",
            "--json", "--post",
            "--registry", registry.url, "--token", evaluator, "--library-digest", digest,
        ]  # fmt: skip
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        out = json.loads(result.output[result.output.index("{") :])
        assert out["summary"]["all"]["n"] == 4
        assert len(out["posted"]) == 2
        items = [
            json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()[1:]
        ]
        assert len(items) == 4
        assert all(0 < i["decoded"] <= 10 for i in items)  # the episode's token budget
        for evaluation_id in out["posted"]:
            stored = admin.get_evaluation(evaluation_id)
            assert stored["library_digest"] == digest
            assert stored["created_by"] == "ci"
            assert stored["n"] == len(stored["items"]) == 4
            assert set(stored["items"]) == {q.id for q in small_suite.questions["test"][:4]}
            assert stored["provenance"]["dataset_digest"] == small_suite.digest
            assert stored["provenance"]["policy"] == "hard"
        admin.close()


def _token(database_url: str, name: str, role: str) -> str:
    result = CliRunner().invoke(
        app,
        [
            "token",
            "create",
            "--name",
            name,
            "--role",
            role,
            "--database-url",
            database_url,
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    return str(json.loads(result.stdout)["token"])
