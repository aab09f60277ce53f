"""Servers in the test process, over real HTTP.

- `serve(app)`: an ASGI app under uvicorn on a free local port, in a thread.
- `registry_in_process(workdir, database_url, store_url)`: the registry as `weact serve` runs
  it (the same `registry.app.prepare` and `create_app`, one worker) in a thread of this
  process. For tests whose subject is not `weact serve` itself: a `weact serve` child costs
  about 1.5 s of CPU to start, this a few milliseconds. `registry.launcher.embedded_registry`
  stays for tests of the server process (start, signals, workers, restarts).
- `stop_accepting(listener, thread)`: close a raw socket server's listener, its accept
  thread gone first.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from registry.api.serving import KEEP_ALIVE_S


def stop_accepting(listener: socket.socket, thread: threading.Thread) -> None:
    """Shut `listener` down (which wakes `thread` blocked in its `accept`), join `thread`,
    then close it, so that no handler outlives its test. A thread left in `accept` on a
    closed listener answered later tests' connections with its own handler (in
    test_client_transport a 502 test got the broken-off body's answer: with py-spy attached,
    which interrupts system calls, 4 runs of 8 of that file failed, and none since)."""
    with contextlib.suppress(OSError):
        listener.shutdown(socket.SHUT_RDWR)
    thread.join(timeout=10)
    listener.close()


@contextmanager
def serve(app: Any, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve an ASGI app with uvicorn on a free local port in a thread; yields its base URL."""
    import uvicorn

    with socket.socket() as sock:
        sock.bind((host, 0))
        port = sock.getsockname()[1]
    # A client's open long poll would hold a graceful shutdown for its whole wait (20 s at
    # a module's teardown, seen): after 1 s the requests still running are cancelled. Idle
    # connections are kept as `weact serve` keeps them: with uvicorn's 5 s, a client reusing
    # one after 5 s idle lost the race (a blob PUT got "server disconnected without sending
    # a response", with 3 test workers on 2 cores).
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", lifespan="on",
        timeout_graceful_shutdown=1, timeout_keep_alive=KEEP_ALIVE_S,
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)


class RunningRegistry(Protocol):
    """What a test uses of a registry, whether served here or by a `weact serve` child."""

    @property
    def url(self) -> str: ...
    @property
    def database_url(self) -> str: ...
    @property
    def store_url(self) -> str: ...
    def bootstrap_token(self, name: str, role: str) -> str: ...


@dataclass(frozen=True)
class InProcessRegistry:
    """A registry served from this process: its URL and where it keeps its data."""

    url: str
    database_url: str
    store_url: str

    def bootstrap_token(self, name: str, role: str) -> str:
        """A token written straight into the database (as `weact token create`)."""
        from registry.db.session import session_scope
        from registry.services.tokens import create_token

        with session_scope(self.database_url) as session:
            _, secret = create_token(session=session, name=name, role=role)
        return secret


@contextmanager
def registry_in_process(
    workdir: Path, database_url: str | None = None, store_url: str | None = None
) -> Iterator[InProcessRegistry]:
    """The registry on `weact serve`'s embedded defaults under `workdir` (or these URLs);
    other settings from WEACT_* as `weact serve` reads them."""
    from registry.app import create_app, prepare
    from registry.settings import Settings

    weact = workdir / ".weact"
    settings = Settings(
        database_url=database_url or f"sqlite:///{weact / 'registry.db'}",
        store_url=store_url or str(weact / "blobs"),
        trust_dir=str(weact / "trust"),
    )
    if "://" in settings.store_url and not settings.timestamp_key:  # else ./.weact in cwd
        settings.timestamp_key = str(weact / "timestamp.key")
    weact.mkdir(parents=True, exist_ok=True)
    prepare(settings)
    app = create_app(settings)
    with serve(app) as url:
        yield InProcessRegistry(url, settings.database_url, settings.store_url)
