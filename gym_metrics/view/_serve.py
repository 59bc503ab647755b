"""Serving the viewer with uvicorn (the `http` extra): in the foreground for `gym-metrics view`,
or in a thread (`Viewer`) for scripts and tests."""

from __future__ import annotations

import asyncio
import errno
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gym_metrics.errors import InvalidInputError
from gym_metrics.view._app import ViewerApp
from gym_metrics.view._runs import find_runs

LOCAL_NAMES = ("127.0.0.1", "localhost", "::1")
MAX_CONNECTIONS = 64
"""Requests served at once (one browser opens a handful)."""


def make_app(paths: Sequence[Path], host: str, allow_hosts: Sequence[str] = ()) -> ViewerApp:
    """The app over the runs of `paths`, answering requests addressed to `host`, the loopback
    names and `allow_hosts`."""
    return ViewerApp(find_runs(paths), (*LOCAL_NAMES, host, *allow_hosts))


def _server(app: ViewerApp, host: str, port: int) -> Any:
    try:
        import uvicorn
    except ImportError:
        raise InvalidInputError("gym-metrics view needs the http extra: pip install 'gym-metrics[http]'") from None
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="on",
                            limit_concurrency=MAX_CONNECTIONS, timeout_keep_alive=5)  # fmt: skip
    return uvicorn.Server(config)


def serve(app: ViewerApp, host: str, port: int, on_ready: Any = None) -> None:
    """Serve until Ctrl-C; `on_ready(url)` once the port is bound. The socket is bound here,
    first, so a taken port or a bad address is one InvalidInputError (uvicorn's own bind logs
    a traceback and exits the process)."""
    server = _server(app, host, port)
    sock = _bound(host, port)

    async def main() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.02)
        if server.started and on_ready is not None:
            on_ready(_url(host, server))
        await task

    with sock:
        asyncio.run(main())


def _bound(host: str, port: int) -> socket.socket:
    if not 0 <= port <= 65535:
        raise InvalidInputError(f"--port {port}: must be in 0..65535")
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise InvalidInputError(f"the viewer cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(MAX_CONNECTIONS)
    except OSError as exc:
        sock.close()
        why = "the port is in use" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
        raise InvalidInputError(f"the viewer cannot listen on {host}:{port}: {why}") from None
    sock.set_inheritable(True)
    return sock


def _url(host: str, server: Any) -> str:
    port = server.servers[0].sockets[0].getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


class Viewer:
    """The viewer served in a background thread: `with Viewer([path]) as v: v.url`."""

    def __init__(self, paths: Sequence[Path], host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = make_app(paths, host)
        self._server = _server(self.app, host, port)
        self._host = host
        self._thread = threading.Thread(target=lambda: asyncio.run(self._server.serve()), daemon=True)
        self.url = ""

    def __enter__(self) -> Viewer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the viewer did not start")
            time.sleep(0.02)
        self.url = _url(self._host, self._server)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
