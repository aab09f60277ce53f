"""Every `weact` command that talks to a registry, against one that does not answer.

The commands are enumerated from the click groups of `cli.main`, and each must be classified
here: either it talks to a registry (it has the shared registry URL option, and minimal
arguments to reach its first registry call are given below) or it does not. A new command
fails `test_every_command_is_classified` until it is added to one of the two tables.

Each registry command runs as the installed `weact` console script with `WEACT_URL` naming a
loopback port that refuses connections: it must exit 1 (`weact gate`: 2, "could not
check") with exactly one line on stderr that names the problem and the URL, no traceback.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from cli.main import app
from evals.suite import generate_suite, write_suite
from registry.client.url_cli import RegistryUrlOption
from registry.trust import create_key

WEACT = Path(sys.executable).with_name("weact")

OFFLINE = {
    "manifest",
    "serve",
    "db upgrade",
    "fsck",  # open the database and the blob store directly, like serve
    "gc",
    "runtime run",
    "runtime backbone",
    "runtime mcp",
    "data inspect",
    "data generate",
    "merge",
    "suite generate",
    "suite verify",
    "demo",  # starts its own embedded registry
    # signed trust: keys and the root of trust are files, `verify` checks a directory
    "key create",
    "root init",
    "root add-key",
    "root revoke-key",
    "root threshold",
    "root sign",
    "root show",
    "adapter verify",
}

# Minimal arguments that reach each command's first registry call. Placeholders:
# {peft} a PEFT directory, {published} one with training.json, {backbone} a directory with
# one safetensors file, {data} an (empty) trajectory file, {suite} a small benchmark suite,
# {tmp} a scratch directory, {key} an approver's private key.
REGISTRY: dict[str, list[str]] = {
    # with WEACT_URL and WEACT_TOKEN (and no --database-url) token commands ask the registry
    "token create": ["--name", "ops", "--role", "admin"],
    "token list": [],
    "token revoke": ["1"],
    "token rebind": ["gpu-1", "1"],
    "backbone register": ["{backbone}", "--name", "tiny"],
    "backbone list": [],
    "backbone show": ["1"],
    "capability create": ["plan", "--description", "plan it"],
    "capability list": [],
    "adapter push": ["{peft}", "--capability", "plan"],
    "adapter pull": ["1", "--to", "{tmp}/pulled"],
    "adapter list": [],
    "adapter show": ["1"],
    "adapter lineage": ["1"],
    "adapter tag": ["1", "k=v"],
    "adapter approve": ["1"],
    "adapter reject": ["1"],
    "adapter revoke": ["1"],
    "channel promote": ["prod", "--adapter", "plan=1"],
    "channel gate": ["prod", "--adapter", "plan=1"],
    "channel rollback": ["prod", "--to", "1"],
    "channel list": [],
    "channel show": ["prod"],
    "channel revisions": ["prod"],
    "channel wait": ["prod", "--after", "0", "--wait", "1"],
    "channel sign": ["prod", "--revision", "1", "--key", "{key}"],
    "channel require": ["prod", "research-em"],
    "audit events": [],
    "nodes": [],
    "train": [
        "--capability",
        "plan",
        "--data",
        "{data}",
        "--backbone",
        "{backbone}",
        "--out",
        "{tmp}/out",
        "--publish",
    ],  # fmt: skip
    "root publish": ["{root}"],  # {root}: a signed root of trust
    "root status": [],
    "runtime serve": ["--backbone", "{backbone}", "--channel", "prod"],
    "benchmark create": ["b", "--dataset-digest", "0" * 64, "--metric", "em"],
    "benchmark list": [],
    "eval list": [],
    "eval nll": [
        "--backbone",
        "{backbone}",
        "--data",
        "{data}",
        "--post",
        "b",
        "--library-digest",
        "0" * 64,
    ],  # fmt: skip
    "eval run": [
        "--suite",
        "{suite}",
        "--backbone",
        "{backbone}",
        "--results",
        "{tmp}/r.jsonl",
        "--post",
    ],  # fmt: skip
}
EXIT_CODES = {"channel gate": 2}  # `weact channel gate`: 2 when the check could not run


def all_commands() -> dict[str, click.Command]:
    """Every runnable command of `weact`, by its path ("adapter push", "train", ...)."""
    ctx = click.Context(app)
    found: dict[str, click.Command] = {}

    def walk(path: str, command: click.Command) -> None:
        if command.hidden:  # an old spelling: tests/test_cli_aliases.py
            return
        group = isinstance(command, click.Group)
        if not group or command.invoke_without_command:
            found[path] = command
        if group:
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                walk(f"{path} {name}", sub)

    for name in app.list_commands(ctx):
        command = app.get_command(ctx, name)
        assert command is not None
        walk(name, command)
    return found


def has_registry_option(command: click.Command) -> bool:
    return any(isinstance(p, RegistryUrlOption) for p in command.params)


def test_every_command_is_classified() -> None:
    commands = all_commands()
    assert set(commands) == OFFLINE | set(REGISTRY), "classify the new command above"
    assert not OFFLINE & set(REGISTRY)
    for path, command in commands.items():
        assert has_registry_option(command) == (path in REGISTRY), path


@contextmanager
def refusing_port() -> Iterator[int]:
    """A loopback port held bound but not listening: every connection is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture(scope="module")
def closed_url() -> Iterator[str]:
    with refusing_port() as port:
        yield f"http://127.0.0.1:{port}"


def write_safetensors(path: Path) -> Path:
    header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0\0\0\0")
    return path


def _signed_root(tmp: Path) -> Path:
    from registry.trust import TrustRoot, create_key, load_public_key, load_signer

    private, public = create_key(tmp / "keys", "admin")
    root = TrustRoot.create([load_public_key(public)], threshold=1)
    root.sign(load_signer(private))
    root.save(tmp / "root.json")
    return tmp / "root.json"


@pytest.fixture(scope="module")
def placeholders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("unreachable")
    backbone = tmp / "backbone"
    backbone.mkdir()
    write_safetensors(backbone / "model.safetensors")
    peft = tmp / "peft"
    peft.mkdir()
    (peft / "adapter_config.json").write_text('{"r": 1, "lora_alpha": 1}')
    write_safetensors(peft / "adapter_model.safetensors")
    published = tmp / "published"
    published.mkdir()
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        (published / name).write_bytes((peft / name).read_bytes())
    (published / "training.json").write_text(json.dumps({"backbone_root": "0" * 64}))
    data = tmp / "data.jsonl"
    data.write_text("")
    suite = write_suite(generate_suite("research", 0, {"train": 1, "dev": 1, "test": 1}), tmp / "s")
    paths = {"peft": peft, "published": published, "backbone": backbone, "data": data}
    paths["root"] = _signed_root(tmp)
    paths["suite"] = suite
    paths["key"] = create_key(tmp, "approver")[0]
    return {"tmp": str(tmp), **{key: str(value) for key, value in paths.items()}}


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str


def weact(args: list[str], env: dict[str, str], cwd: str) -> Run:
    done = subprocess.run(
        [str(WEACT), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )
    return Run(done.returncode, done.stdout, done.stderr)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEACT_")}
    return {**env, "WEACT_TOKEN": "not-a-token", "COLUMNS": "200", **extra}


@pytest.fixture(scope="module")
def runs(closed_url: str, placeholders: dict[str, str]) -> dict[str, Run]:
    """Every registry command, run at once (each its own process), with WEACT_URL set."""
    env = clean_env(WEACT_URL=closed_url)

    def run(path: str) -> Run:
        args = [arg.format(**placeholders) for arg in REGISTRY[path]]
        return weact([*path.split(), *args], env, placeholders["tmp"])

    with ThreadPoolExecutor(max_workers=6) as pool:
        return dict(zip(REGISTRY, pool.map(run, REGISTRY), strict=True))


@pytest.mark.parametrize("path", sorted(REGISTRY))
def test_an_unreachable_registry_is_one_line_and_a_failure(
    path: str, runs: dict[str, Run], closed_url: str
) -> None:
    run = runs[path]
    assert run.code == EXIT_CODES.get(path, 1), run.stderr
    assert "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("Error: unavailable: cannot reach the registry (")
    assert closed_url in lines[0]
    assert "Connection refused" in lines[0]


@pytest.mark.parametrize(
    ("path", "option"),
    [
        ("channel list", "--registry"),
        ("channel list", "--url"),
        ("train", "--registry"),
        ("runtime serve", "--registry"),
    ],
)
def test_each_spelling_of_the_registry_url_is_read_the_same_way(
    path: str, option: str, placeholders: dict[str, str]
) -> None:
    """The option beats WEACT_URL; WEACT_REGISTRY_URL still works, with a warning first."""
    args = [*path.split(), *(a.format(**placeholders) for a in REGISTRY[path])]
    cwd = placeholders["tmp"]
    with refusing_port() as given, refusing_port() as other:
        url, env_url = f"http://127.0.0.1:{given}", f"http://127.0.0.1:{other}"
        by_option = weact([*args, option, url], clean_env(WEACT_URL=env_url), cwd)
        by_alias = weact(args, clean_env(WEACT_REGISTRY_URL=url), cwd)
        bad = weact([*args, option, "127.0.0.1:8000"], clean_env(), cwd)
    assert by_option.code == 1
    assert url in by_option.stderr
    assert env_url not in by_option.stderr
    warning, error = by_alias.stderr.splitlines()
    assert warning == "Warning: WEACT_REGISTRY_URL is deprecated, set WEACT_URL instead"
    assert error.startswith("Error: unavailable: cannot reach the registry")
    assert url in error
    assert by_alias.code == 1
    assert bad.code == 2
    assert "expected http(s)://HOST[:PORT]" in bad.stderr
