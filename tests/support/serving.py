"""`serve(app)`: an ASGI app under uvicorn on a free local port, for tests over real HTTP."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def serve(app: Any, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve an ASGI app with uvicorn on a free local port in a thread; yields its base URL."""
    import uvicorn

    with socket.socket() as sock:
        sock.bind((host, 0))
        port = sock.getsockname()[1]
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
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
