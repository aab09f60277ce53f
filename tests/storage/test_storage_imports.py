"""`storage` stays light: no torch, no numpy, and boto3 only once an s3:// store is opened."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return set(out.stdout.split())


def test_import_storage_loads_no_heavy_or_optional_modules() -> None:
    loaded = _loaded_after("import storage, storage.cli")
    assert not loaded & {"torch", "numpy", "boto3", "botocore", "safetensors"}
    assert not {m for m in loaded if m.split(".")[0] in {"registry", "runtime", "trainers"}}


def test_s3_store_loads_boto3_on_first_use() -> None:
    loaded = _loaded_after(
        "import storage\nstorage.open_store('s3://bucket/p', endpoint_url='http://127.0.0.1:9')"
    )
    assert "boto3" in loaded
