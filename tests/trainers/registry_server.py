"""A real registry for the trainers' tests: `weact serve` in a subprocess on a free port."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx


@dataclass(frozen=True)
class Server:
    url: str
    admin_token: str


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _weact(*args: str) -> list[str]:
    return [sys.executable, "-c", "from cli.main import main; main()", *args]


@contextlib.contextmanager
def weact_serve(workdir: Path, timeout: float = 60.0) -> Iterator[Server]:
    db = f"sqlite:///{workdir / 'registry.db'}"
    created = subprocess.run(
        _weact(
            "token", "create", "--name", "root", "--role", "admin", "--database-url", db, "--json"
        ),
        capture_output=True,
        text=True,
        check=True,
        cwd=workdir,
    )
    token = json.loads(created.stdout)["token"]
    port = _free_port()
    argv = _weact(
        "serve", "--port", str(port), "--database-url", db, "--store", str(workdir / "blobs")
    )
    log = workdir / "serve.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, cwd=workdir, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(url, process, log, timeout)
        yield Server(url, token)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"weact serve exited:\n{log.read_text()[-2000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/v1/healthz", timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"weact serve not healthy after {timeout} s:\n{log.read_text()[-2000:]}")
