"""Runs the registry app under uvicorn, in one process or in `workers` processes, ending
open long-polls as soon as a stop begins.

uvicorn's graceful shutdown waits for every open request before the app's lifespan ends,
so a long-poll (up to `long_poll_max_s`) would hold a stop for that long. `RegistryServer`
closes the app's `ChannelNotifier` first: every long-poll answers 304 at once and its
connection closes, then uvicorn shuts down as usual.

With `workers > 1`, uvicorn's supervisor starts that many processes on one listening socket;
each builds its own app from the `WEACT_*` environment (through the `factory` it is given,
`registry.app.APP_FACTORY` for `weact serve`), with its own caches, notifier and (on
PostgreSQL) LISTEN connection, so a promotion through any worker wakes the long-polls and
invalidates the channel caches of all of them. On SQLite the
workers share the file: writes stay one at a time (`BEGIN IMMEDIATE`, busy timeout) and
the others notice commits through `PRAGMA data_version` and their long-poll interval.

    serve_registry(create_app(settings), host="127.0.0.1", port=8000)
    serve_workers(4, APP_FACTORY, host="127.0.0.1", port=8000)  # settings from the environment

Both read slow clients' requests with deadlines (`registry.api.timeouts`).
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from typing import Any

import uvicorn
from fastapi import FastAPI
from uvicorn.supervisors.multiprocess import Multiprocess, Process

from registry.api.metrics import MULTIPROC_ENV
from registry.api.notify import ChannelNotifier
from registry.api.timeouts import TimedH11Protocol


def find_notifier(app: Any) -> ChannelNotifier | None:
    """The notifier of the registry app inside uvicorn's middleware wrappers."""
    while app is not None:
        state = getattr(getattr(app, "state", None), "weact", None)
        if state is not None:
            notifier: ChannelNotifier = state.notifier
            return notifier
        app = getattr(app, "app", None)
    return None


class RegistryServer(uvicorn.Server):
    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        notifier = find_notifier(self.config.loaded_app)
        if notifier is not None:
            notifier.close()
        await super().shutdown(sockets)


class _RegistryProcess(Process):
    @property
    def server(self) -> uvicorn.Server:
        if self._server is None:
            self._server = RegistryServer(config=self.config)
        return self._server


class _RegistryWorkers(Multiprocess):
    def init_processes(self) -> None:
        for _ in range(self.processes_num):
            process = _RegistryProcess(self.config, self.sockets)
            process.start()
            self.processes.append(process)


# Longer than the idle timeout of common load balancers (60 s) and than a long-poll's gap:
# a connection is never closed for idleness just as a node reuses it (uvicorn's 5 s default
# loses that race under load: the client sees "server disconnected without a response").
KEEP_ALIVE_S = 75


def default_workers(database_url: str) -> int:
    """The core count on PostgreSQL; 1 on SQLite (one writer; more may be asked for)."""
    if database_url.startswith("sqlite"):
        return 1
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)


def serve_registry(app: FastAPI, *, host: str, port: int, log_level: str = "info") -> None:
    """Serve `app` (from `registry.app.create_app`) until SIGINT/SIGTERM."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        timeout_keep_alive=KEEP_ALIVE_S,
        http=TimedH11Protocol,
    )
    RegistryServer(config).run()


def tcp_listener(config: uvicorn.Config) -> socket.socket:
    """The socket `config` binds, marked as TCP. uvicorn's `bind_socket()` leaves its proto at
    0, accepted connections inherit it, and asyncio sets TCP_NODELAY only on sockets whose
    proto is TCP (uvicorn issue 3149): with `--workers N` every keep-alive response after the
    first then waited ~40 ms for the client's delayed ACK (bench/bench_registry.py, 16
    clients on 2 workers: p50 44 ms, a third of 1 worker's throughput)."""
    bound = config.bind_socket()
    if bound.family not in (socket.AF_INET, socket.AF_INET6):
        return bound  # a Unix socket: no Nagle
    return socket.socket(bound.family, bound.type, socket.IPPROTO_TCP, fileno=bound.detach())


def serve_workers(
    workers: int, factory: str, *, host: str, port: int, log_level: str = "info"
) -> None:
    """Serve `workers` processes, each building its app with `factory` ("module:function",
    no arguments), until SIGINT/SIGTERM."""
    config = uvicorn.Config(
        factory,
        factory=True,
        host=host,
        port=port,
        log_level=log_level,
        timeout_keep_alive=KEEP_ALIVE_S,
        http=TimedH11Protocol,
        workers=workers,
    )
    # Counters shared by the workers (registry/api/metrics.py); set before they start.
    owned = None
    if not os.environ.get(MULTIPROC_ENV):
        owned = tempfile.mkdtemp(prefix="weact-metrics-")
        os.environ[MULTIPROC_ENV] = owned
    try:
        _RegistryWorkers(config, sockets=[tcp_listener(config)]).run()
    finally:
        if owned is not None:
            os.environ.pop(MULTIPROC_ENV, None)
            shutil.rmtree(owned, ignore_errors=True)
