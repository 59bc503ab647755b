"""An ASGI app served by uvicorn on the gRPC server's own event loop (the MCP and HTTP doors).

Both doors resist slow clients: a request's head and body must arrive within READ_TIMEOUT_S of
its first byte (of the connection, for the first request), or the connection is closed (uvicorn
alone waits forever for a partial request: 1,100 such connections once used up the process's
open files and locked gRPC clients out); past MAX_CONNECTIONS open connections a new one is
answered 503 and closed at once. Time spent answering (a verify) is not reading and is not
bounded here; an idle kept-alive connection closes after uvicorn's 5 s.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass
from typing import Any

from gym_metrics.errors import InvalidInputError


READ_TIMEOUT_S = 30.0
"""Seconds a request's head and body may take to arrive (64 MB at 2 MB/s)."""
MAX_CONNECTIONS = 256
"""Connections one door holds open at once."""

_BUSY = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 25\r\nconnection: close\r\n\r\ntoo many open connections"


def guarded_protocol(read_timeout_s: float, max_connections: int) -> type:
    """uvicorn's h11 protocol with a read deadline per request and a bound on connections."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Guarded(H11Protocol):
        _reading: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.write(_BUSY)
                transport.close()
                return
            self._read_by_deadline()

        def data_received(self, data: bytes) -> None:
            if self.cycle is None or self.cycle.response_complete:  # a new request begins
                self._read_by_deadline()
            super().data_received(data)
            cycle = self.cycle  # the last request's, answered, until a new head is whole
            if cycle is not None and not cycle.response_complete and not cycle.more_body and self._reading is not None:
                self._reading.cancel()  # all of it arrived: answering is not reading
                self._reading = None

        def connection_lost(self, exc: Exception | None) -> None:
            if self._reading is not None:
                self._reading.cancel()
            super().connection_lost(exc)

        def _read_by_deadline(self) -> None:
            if self._reading is None:
                self._reading = self.loop.call_later(read_timeout_s, self._too_slow)

        def _too_slow(self) -> None:
            self._reading = None
            if not self.transport.is_closing():
                self.transport.close()  # the app, if it waits for the body, reads a disconnect

    return Guarded


@dataclass
class Served:
    """A running uvicorn server: its bound port; `stop()` ends it."""

    server: Any
    task: asyncio.Task[None]
    port: int

    async def stop(self) -> None:
        self.server.should_exit = True
        await asyncio.wait_for(asyncio.shield(self.task), 10)


async def start_uvicorn(app: Any, host: str, port: int, what: str, extra: str) -> Served:
    """Serve `app` on host:port (0 picks one) until stopped; InvalidInputError when uvicorn is
    missing (naming the extra that installs it) or the port cannot be bound."""
    try:
        import uvicorn
    except ImportError:
        raise InvalidInputError(f"{what} needs the {extra} extra: pip install 'gym-metrics[{extra}]'") from None
    try:  # bound here: uvicorn's own bind failing exits the process from its task (SystemExit, two tracebacks)
        sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    except OSError as exc:
        raise InvalidInputError(f"{what} cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    protocol = guarded_protocol(READ_TIMEOUT_S, MAX_CONNECTIONS)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on", access_log=False, http=protocol)
    server = uvicorn.Server(config)
    # uvicorn.Server.serve() swaps in its own SIGINT/SIGTERM handlers: the gRPC server owns the
    # signals (its graceful stop stops this door too), so serve without them.
    task = asyncio.get_running_loop().create_task(server._serve(sockets=[sock]))
    for _ in range(1000):  # bounded: 10 s
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    if not server.started:
        server.should_exit = True
        raise InvalidInputError(f"{what} did not start on {host}:{port}")
    return Served(server, task, int(server.servers[0].sockets[0].getsockname()[1]))
