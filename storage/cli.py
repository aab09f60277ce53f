"""`weact manifest PATH... [--json]`: the manifest root of safetensors files.

Each PATH is a safetensors file or a directory of `*.safetensors` shards; all of them form
one manifest. Invalid input exits with code 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from storage.errors import StorageError
from storage.manifest import Manifest, manifest_of_files, safetensors_files

EXIT_INVALID = 2


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print every tensor and the root as JSON.")
def manifest(paths: tuple[Path, ...], as_json: bool) -> None:
    """Print the manifest root of safetensors files (or directories of shards)."""
    try:
        result = _manifest_of(paths)
    except (StorageError, OSError) as exc:
        click.echo(f"weact manifest: {_one_line(exc)}", err=True)
        sys.exit(EXIT_INVALID)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
    else:
        click.echo(result.root)


def _manifest_of(paths: tuple[Path, ...]) -> Manifest:
    files = [f for path in paths for f in safetensors_files(path)]
    return manifest_of_files(files)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}"
    else:
        text = str(exc)
    return " ".join(text.split())
