"""A job server (gym_metrics._transport.start_job_server) on 127.0.0.1:0 in a thread of its
own, so sync tests can drive it through the sync JobClient."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

from gym_metrics._transport.jobs import JobServerOptions, RunningJobServer, start_job_server
from gym_metrics._transport.server import ServerConfig


class JobServerThread:
    """`with JobServerThread(tmp_path / "jobs.sqlite", ...) as server:` then `server.address`;
    stopped (jobs left resumable) on exit. `running` is the RunningJobServer."""

    def __init__(self, db: Path, *, auth_token: str | None = None, **options: Any) -> None:
        self.config = ServerConfig(port=0, auth_token=auth_token, grace_seconds=1.0, log_requests=False)
        self.options = JobServerOptions(db=db, **options)
        self.running: RunningJobServer | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="job-server", daemon=True)

    @property
    def address(self) -> str:
        assert self.running is not None
        return self.running.address

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported by __enter__
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        self.running = await start_job_server(self.config, self.options)
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await self.running.stop(1.0)

    def __enter__(self) -> JobServerThread:
        self._thread.start()
        assert self._ready.wait(30), "job server did not start within 30 s"
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        assert not self._thread.is_alive(), "job server did not stop within 30 s"
