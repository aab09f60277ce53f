"""An adapter directory written whole or not at all.

Files are written into a temporary directory beside the target, which is renamed into place
when every file is there: an error or a crash never leaves a half-written adapter that peft or
`weact adapter push` would pick up.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from trainers.errors import OutputExistsError


def check_empty(out: str | os.PathLike[str]) -> None:
    """Refuse an output path that holds anything (checked before expensive work)."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise OutputExistsError(f"output directory {out} exists and is not empty")


@contextmanager
def adapter_dir(out: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary directory to fill; it becomes `out` when the block succeeds."""
    out = Path(out)
    check_empty(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=out.parent))
    try:
        yield tmp
        if out.exists():
            out.rmdir()
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
