"""`weact manifest PATH... [--json]`: the manifest root of safetensors files.

Each PATH is a safetensors file or a directory of `*.safetensors` shards; all of them form
one manifest. Failures follow the convention of every `weact` command (`clikit.errors`,
which imports nothing of the project either): a file that cannot be read as safetensors is
one line on stderr (`Error: <path>: <problem>`) and exit 1, never a traceback; a PATH that
does not exist is a usage error, exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from clikit.errors import fail_cleanly
from storage.errors import StorageError
from storage.manifest import Manifest, manifest_of_files, safetensors_files


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print every tensor and the root as JSON.")
@fail_cleanly(StorageError)
def manifest(paths: tuple[Path, ...], as_json: bool) -> None:
    """Print the manifest root of safetensors files (or directories of shards)."""
    result = _manifest_of(paths)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
    else:
        click.echo(result.root)


def _manifest_of(paths: tuple[Path, ...]) -> Manifest:
    files = [f for path in paths for f in safetensors_files(path)]
    return manifest_of_files(files)
