"""Runs the registry app under uvicorn, ending open long-polls as soon as a stop begins.

uvicorn's graceful shutdown waits for every open request before the app's lifespan ends,
so a long-poll (up to `long_poll_max_s`) would hold a stop for that long. `RegistryServer`
closes the app's `ChannelNotifier` first: every long-poll answers 304 at once and its
connection closes, then uvicorn shuts down as usual.

    serve_registry(create_app(settings), host="127.0.0.1", port=8000)
"""

from __future__ import annotations

import socket

import uvicorn
from fastapi import FastAPI

from registry.api.notify import ChannelNotifier


class RegistryServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, notifier: ChannelNotifier) -> None:
        super().__init__(config)
        self.notifier = notifier

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.notifier.close()
        await super().shutdown(sockets)


# Longer than the idle timeout of common load balancers (60 s) and than a long-poll's gap:
# a connection is never closed for idleness just as a node reuses it (uvicorn's 5 s default
# loses that race under load: the client sees "server disconnected without a response").
KEEP_ALIVE_S = 75


def serve_registry(app: FastAPI, *, host: str, port: int, log_level: str = "info") -> None:
    """Serve `app` (from `registry.api.app.create_app`) until SIGINT/SIGTERM."""
    config = uvicorn.Config(
        app, host=host, port=port, log_level=log_level, timeout_keep_alive=KEEP_ALIVE_S
    )
    RegistryServer(config, app.state.weact.notifier).run()
