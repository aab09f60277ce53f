"""`weact serve --workers N`: accepted connections get TCP_NODELAY, as with one worker.

uvicorn's `Config.bind_socket()` leaves the listener's proto at 0; asyncio then skips
TCP_NODELAY on every accepted socket, and each keep-alive response after the first waits
~40 ms for the client's delayed ACK. `tcp_listener` marks the socket as TCP.
"""

from __future__ import annotations

import asyncio
import socket

import uvicorn

from registry.api.serving import tcp_listener


async def _nodelay_of_accepted(listener: socket.socket) -> int:
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Report(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await asyncio.get_running_loop().create_server(Report, sock=listener)
    host, port = listener.getsockname()[:2]
    _, writer = await asyncio.open_connection(host, port)
    try:
        return await asyncio.wait_for(accepted, 10)
    finally:
        writer.close()
        server.close()
        await server.wait_closed()


def test_the_workers_listener_gives_connections_tcp_nodelay() -> None:
    config = uvicorn.Config(lambda: None, host="127.0.0.1", port=0)
    listener = tcp_listener(config)
    assert listener.proto == socket.IPPROTO_TCP
    assert asyncio.run(_nodelay_of_accepted(listener)) != 0
