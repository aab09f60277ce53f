"""`weact manifest`, through the real dispatcher and the installed entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from storage_helpers import random_tensors, write_raw, write_st

from cli.main import app
from storage import manifest_of_file


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["manifest", *args])
    return result.exit_code, result.stdout, result.stderr


def test_prints_the_root_of_files_and_directories(tmp_path: Path) -> None:
    tensors = random_tensors(seed=11, count=6)
    names = sorted(tensors)
    single = write_st(tmp_path / "one.safetensors", tensors)
    shards = tmp_path / "shards"
    shards.mkdir()
    write_st(shards / "a.safetensors", {n: tensors[n] for n in names[:3]})
    write_st(tmp_path / "b.safetensors", {n: tensors[n] for n in names[3:]})
    root = manifest_of_file(single).root
    assert _run(str(single)) == (0, root + "\n", "")
    assert _run(str(shards), str(tmp_path / "b.safetensors")) == (0, root + "\n", "")


def test_json_lists_tensors_and_root(tmp_path: Path) -> None:
    path = write_st(tmp_path / "m.safetensors", {"w": np.zeros((2, 3), dtype=np.float16)})
    code, out, _ = _run(str(path), "--json")
    assert code == 0
    obj = json.loads(out)
    assert obj == manifest_of_file(path).to_json()
    assert obj["tensors"][0]["shape"] == [2, 3]
    assert obj["tensors"][0]["dtype"] == "F16"


def _bad_header(tmp: Path) -> Path:
    return write_raw(tmp / "bad.safetensors", {"x": {"dtype": "F99"}}, b"")


def _too_short(tmp: Path) -> Path:
    (tmp / "short.safetensors").write_bytes(b"\x01")
    return tmp / "short.safetensors"


def _missing(tmp: Path) -> Path:
    return tmp / "missing.safetensors"


def _empty_dir(tmp: Path) -> Path:
    return tmp


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (_bad_header, "bad.safetensors: tensor 'x'"),
        (_too_short, "short.safetensors: too short"),
        (_empty_dir, "no *.safetensors"),
    ],
)
def test_a_file_that_is_not_safetensors_exits_1_with_one_line(
    tmp_path: Path, make: Callable[[Path], Path], problem: str
) -> None:
    code, out, err = _run(str(make(tmp_path)))
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("Error: ")
    assert problem in err
    assert "Traceback" not in err


def test_a_path_that_does_not_exist_is_a_usage_error(tmp_path: Path) -> None:
    code, out, err = _run(str(_missing(tmp_path)))
    assert (code, out) == (2, "")
    assert "missing.safetensors' does not exist" in err


def test_duplicate_tensor_across_paths_exits_1(tmp_path: Path) -> None:
    arr = np.ones(2, dtype=np.int8)
    a = write_st(tmp_path / "a.safetensors", {"x": arr})
    b = write_st(tmp_path / "b.safetensors", {"x": arr})
    code, _, err = _run(str(a), str(b))
    assert (code, err.count("\n")) == (1, 1)
    assert "'x'" in err


def test_installed_entry_point(tmp_path: Path) -> None:
    good = write_st(tmp_path / "m.safetensors", random_tensors(seed=12))
    bad = write_raw(tmp_path / "bad.safetensors", b"{not json", b"")
    weact = Path(sys.executable).parent / "weact"
    ok = subprocess.run([weact, "manifest", good], capture_output=True, text=True, check=False)
    assert (ok.returncode, ok.stdout.strip()) == (0, manifest_of_file(good).root)
    err = subprocess.run([weact, "manifest", bad], capture_output=True, text=True, check=False)
    assert err.returncode == 1
    assert err.stderr.splitlines() == [err.stderr.strip()]
    assert str(bad) in err.stderr
