from __future__ import annotations

from pathlib import Path

import pytest

from trainers.adapter_dir import adapter_dir
from trainers.errors import OutputExistsError


def test_a_finished_block_becomes_the_directory(tmp_path: Path) -> None:
    with adapter_dir(tmp_path / "out") as tmp:
        (tmp / "adapter_config.json").write_text("{}")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["adapter_config.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temp left


def _half_write(out: Path) -> None:
    with adapter_dir(out) as tmp:
        (tmp / "adapter_model.safetensors").write_bytes(b"half")
        raise RuntimeError("crash mid-write")


def test_an_error_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="crash"):
        _half_write(tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_an_empty_target_is_reused_and_a_full_one_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with adapter_dir(tmp_path / "empty") as tmp:
        (tmp / "a").write_text("x")
    assert (tmp_path / "empty" / "a").read_text() == "x"
    with pytest.raises(OutputExistsError, match="not empty"), adapter_dir(tmp_path / "empty"):
        pass
    assert (tmp_path / "empty" / "a").read_text() == "x"
