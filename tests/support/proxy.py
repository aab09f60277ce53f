"""`TcpProxy`: a loopback TCP forwarder that a test can cut and restore (a network outage).

with TcpProxy("127.0.0.1", registry_port) as proxy:
    client = RegistryClient(proxy.url)
    proxy.cut()      # open connections dropped, new ones refused
    proxy.restore()  # accepting again, on the same port
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Self

from support.serving import stop_accepting


class TcpProxy:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._up = threading.Event()
        self._closed = False
        self._up.set()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def cut(self) -> None:
        """Reset every open connection and refuse new ones until `restore()`."""
        self._up.clear()
        with self._lock:
            sockets, self._open = list(self._open), set()
        for sock in sockets:
            _reset(sock)

    def restore(self) -> None:
        self._up.set()

    def close(self) -> None:
        self._closed = True
        self.cut()
        stop_accepting(self._listener, self._thread)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._up.is_set():
                _reset(client)  # as good as refused
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                self._open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def _reset(sock: socket.socket) -> None:
    """Drop a connection (shutdown also wakes a thread blocked reading it)."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
