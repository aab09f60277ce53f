"""A suite's manifest (`suite.json`): per-file sha256 and the suite digest, verified on read.

Pure standard library, so that registry-only installs can read a suite's digest
(`weact benchmark create --suite DIR`) without the evaluation extras.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evals.errors import SuiteError

MANIFEST = "suite.json"


def canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def suite_digest(files: Mapping[str, str]) -> str:
    """The suite's digest from {file name: sha256 of its bytes}."""
    return hashlib.sha256(canonical_json({"files": dict(files)})).hexdigest()


def verified_manifest(root: Path) -> dict[str, Any]:
    """The manifest of a suite directory after checking every file and the digest."""
    try:
        manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
        files = dict(manifest["files"])
    except FileNotFoundError:
        raise SuiteError(f"{root} is not a suite: no {MANIFEST}") from None
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise SuiteError(f"{root / MANIFEST}: malformed manifest ({exc})") from None
    for name, expected in sorted(files.items()):
        path = root / name
        if Path(name).name != name or not path.is_file():
            raise SuiteError(f"{root}: file {name!r} of the manifest is missing")
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
        if actual != expected:
            raise SuiteError(f"{path}: sha256 {actual} differs from the manifest's {expected}")
    if suite_digest(files) != manifest.get("digest"):
        raise SuiteError(f"{root / MANIFEST}: digest does not match its files")
    return dict(manifest)
