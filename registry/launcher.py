"""A real registry in a child process: `weact serve` on a free port, with its first token.

What a local session needs a registry for (`weact demo`, the continual step of
`python -m evals.reproduce`, the benchmarks under bench/, the tests) starts it here.

`embedded_registry(workdir)` starts the `weact` console script of this interpreter, waits for
`/v1/healthz` and stops the server when the block exits. What is not given runs on serve's
embedded defaults, relative to `workdir`: SQLite at `.weact/registry.db`, blobs under
`.weact/blobs`. `EmbeddedRegistry.bootstrap_token` writes the first (admin) token straight
into the database, as `weact token create` does, since nothing can create one over HTTP yet.
`child_process` and `wait_until_healthy` are the two halves of that for any server (the
runtime nodes and vLLM servers of the tests): output to a log, stopped on exit.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from registry.client.transport import tls_context

# Registry settings a user may have exported; the child must use the ones given here.
_REGISTRY_ENV = ("WEACT_DATABASE_URL", "WEACT_STORE_URL")


@dataclass(frozen=True)
class EmbeddedRegistry:
    """A running `weact serve`: its URL, where it keeps its data, its process and log."""

    url: str
    database_url: str
    store_url: str
    process: subprocess.Popen[bytes]
    log: Path

    def bootstrap_token(self, name: str, role: str) -> str:
        """A token written straight into the database (as `weact token create`)."""
        from registry.db.session import session_scope
        from registry.services.tokens import create_token

        with session_scope(self.database_url) as session:
            _, secret = create_token(session=session, name=name, role=role)
        return secret


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def weact_command() -> list[str]:
    """The `weact` console script of this interpreter (or the same entry point via -c)."""
    script = Path(sys.executable).with_name("weact")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from cli.main import main; main()"]


@contextlib.contextmanager
def embedded_registry(
    workdir: Path,
    database_url: str | None = None,
    store_url: str | None = None,
    timeout: float = 60.0,
    workers: int | None = 1,
) -> Iterator[EmbeddedRegistry]:
    """Run `weact serve` on a free port in `workdir` until the block exits.

    One server process unless `workers` says otherwise (None: `weact serve`'s default).
    """
    port = free_port()
    argv = weact_command() + ["serve", "--port", str(port), "--log-level", "warning"]
    if workers is not None:
        argv += ["--workers", str(workers)]
    if database_url is None:
        database_url = f"sqlite:///{workdir / '.weact' / 'registry.db'}"
    else:
        argv += ["--database-url", database_url]
    if store_url is None:
        store_url = str(workdir / ".weact" / "blobs")
    else:
        argv += ["--store", store_url]
    env = {k: v for k, v in os.environ.items() if k not in _REGISTRY_ENV}
    url = f"http://127.0.0.1:{port}"
    log = workdir / "serve.log"
    with child_process(argv, log, cwd=workdir, env=env) as process:
        wait_until_healthy(f"{url}/v1/healthz", process, log, timeout, what="weact serve")
        yield EmbeddedRegistry(url, database_url, store_url, process, log)


@contextlib.contextmanager
def child_process(
    argv: Sequence[str],
    log: Path,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    stop_timeout: float = 10.0,
) -> Iterator[subprocess.Popen[bytes]]:
    """`argv` running with its output in `log` until the block exits; then terminated
    (killed when it has not exited after `stop_timeout` seconds)."""
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=stop_timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_until_healthy(
    url: str,
    process: subprocess.Popen[bytes],
    log: Path,
    timeout: float,
    *,
    what: str,
    headers: Mapping[str, str] | None = None,
    pause: float = 0.1,
) -> None:
    """Until `url` answers 200; RuntimeError with the tail of `log` when `process` exits
    first or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    # one client for the whole wait, with the process's one TLS context
    with httpx.Client(headers=headers, timeout=2, verify=tls_context()) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"{what} exited:\n{log.read_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if client.get(url).status_code == 200:
                    return
            time.sleep(pause)
    raise RuntimeError(f"{what} not healthy after {timeout} s:\n{log.read_text()[-3000:]}")


@contextlib.contextmanager
def registry_processes(
    workdir: Path, count: int, database_url: str, store_url: str
) -> Iterator[list[EmbeddedRegistry]]:
    """`count` `weact serve` processes (one worker each) on one database and one blob store,
    as registry replicas behind a load balancer; each keeps its log in `workdir/registry-i`.
    """
    with contextlib.ExitStack() as stack:
        servers = []
        for i in range(count):
            directory = workdir / f"registry-{i}"
            directory.mkdir(parents=True, exist_ok=True)
            servers.append(
                stack.enter_context(embedded_registry(directory, database_url, store_url))
            )
        yield servers
