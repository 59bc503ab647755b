"""An ASGI app served by uvicorn on the gRPC server's own event loop (the MCP and HTTP doors)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from gym_metrics.errors import InvalidInputError


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
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on", access_log=False)
    server = uvicorn.Server(config)
    # uvicorn.Server.serve() swaps in its own SIGINT/SIGTERM handlers: the gRPC server owns the
    # signals (its graceful stop stops this door too), so serve without them.
    task = asyncio.get_running_loop().create_task(server._serve())
    for _ in range(1000):  # bounded: 10 s
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    if not server.started:
        server.should_exit = True
        raise InvalidInputError(f"{what} did not start on {host}:{port}")
    return Served(server, task, int(server.servers[0].sockets[0].getsockname()[1]))
