"""The warm pool: launchers started ahead of the runs, and a bound on runs at once.

A launcher runs each of its jobs in a fork of itself (gym_metrics/sandbox/_launch.py), so a
run in a started launcher costs a fork instead of a process start, and no run sees another's
state: each is a fresh fork of a launcher that runs no job's code. Runs past `size` wait in
line, up to `queue_timeout_s`, then fail with SandboxBusyError: a verify that could not run
says so instead of scoring 0. A launcher that died is replaced, and a run it never took tried
once more (never one that started: a program does not run twice). Programs kept running
(sessions' interpreters) are bounded apart, `max_open` at once. The pool checks at its
construction that the host gives the isolation asked for (SandboxUnavailableError: a server
refuses to start), and `aclose` stops everything it started and removes its directories.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections import Counter

from gym_metrics.sandbox._cgroups import Cgroups
from gym_metrics.sandbox._isolation import Isolation, check_isolation, default_isolation, warn_root_runs
from gym_metrics.sandbox._local import Launcher, LauncherGoneError, OpenRun
from gym_metrics.sandbox._program import Limits, Program, RunResult
from gym_metrics.errors import OverloadedError


class SandboxBusyError(OverloadedError):
    """A run waited `queue_timeout_s` for a free place in the pool, or `max_open` programs (or
    a client's share of them) are kept running already: the server answers RESOURCE_EXHAUSTED,
    a caller may retry later."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retry_after_s=1.0)


class Pool:
    """Up to `size` runs at once (default: twice the CPUs), over `launchers` started launchers,
    and up to `max_open` programs kept running; `isolation` defaults to `strict` (or
    GYM_METRICS_SANDBOX_ISOLATION, which `serve --sandbox-isolation` sets)."""

    def __init__(self, size: int | None = None, *, launchers: int = 2, isolation: Isolation | None = None,
                 users: bool = True, queue_timeout_s: float = 300.0, max_open: int = 32,
                 max_open_per_client: int | None = None) -> None:  # fmt: skip
        self.size = size if size is not None else 2 * (os.cpu_count() or 1)
        self.isolation = isolation or default_isolation()
        check_isolation(self.isolation)  # fails closed, at the server's start
        self.users = users
        if self.isolation == "strict" and not self.isolated:
            warn_root_runs()  # said at the start (its launchers start at the first run)
        self.queue_timeout_s = queue_timeout_s
        self.max_open = max_open
        self.max_open_per_client = max_open_per_client if max_open_per_client is not None else max(1, max_open // 2)
        """One client's share of `max_open` (default half): one client cannot take every place."""
        self._open: Counter[str] = Counter()
        self._cgroups: Cgroups | None = None
        self._cgroups_found = False
        self._count = launchers
        self._launchers: list[Launcher | None] = [None] * launchers
        self._starting: list[asyncio.Lock] = []
        self._finding = asyncio.Lock()
        self._turn = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots = asyncio.Semaphore(self.size)
        self._closed = False

    @property
    def isolated(self) -> bool:
        """What every run's result says in `isolated`: strict isolation, and a user of its own
        on a root server (users=False leaves it uid 0)."""
        return self.isolation == "strict" and (self.users or os.geteuid() != 0)

    def _bind(self) -> None:
        """Launchers belong to the event loop that started them: a pool used from a new loop
        (asyncio.run again) lets the old ones go and starts afresh."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        for launcher in self._launchers:
            if launcher is not None:
                launcher.discard()
        self._loop, self._slots = loop, asyncio.Semaphore(self.size)
        self._launchers = [None] * self._count
        self._starting = [asyncio.Lock() for _ in range(self._count)]
        self._finding = asyncio.Lock()

    async def _launcher(self, i: int) -> Launcher:
        async with self._starting[i]:
            launcher = self._launchers[i]
            if launcher is None or not launcher.alive:
                if launcher is not None:
                    launcher.discard()
                cgroups = await self._find_cgroups()
                launcher = self._launchers[i] = await Launcher.start(isolation=self.isolation, users=self.users, cgroups=cgroups)
            return launcher

    async def _find_cgroups(self) -> Cgroups | None:
        """Once for the pool (launchers starting together wait for one another): a directory
        of its own in each cgroup hierarchy, where the host allows."""
        async with self._finding:
            if not self._cgroups_found:
                self._cgroups = await asyncio.to_thread(Cgroups.find) if os.geteuid() == 0 else None
                self._cgroups_found = True
        return self._cgroups

    @property
    def bounded(self) -> bool:
        """Whether each run has a cgroup: one bound on its memory and processes in all (else
        they hold per process and per user; docs/sandbox.md)."""
        return self._cgroups is not None

    async def start(self) -> None:
        """Start the launchers now (else the first runs start them)."""
        self._bind()
        await asyncio.gather(*(self._launcher(i) for i in range(self._count)))

    async def run(self, program: Program, limits: Limits = Limits()) -> RunResult:
        """Run `program` in one of the started launchers, once a place is free."""
        if self._closed:
            raise RuntimeError("the sandbox pool is closed")
        self._bind()
        try:
            await asyncio.wait_for(self._slots.acquire(), self.queue_timeout_s)
        except asyncio.TimeoutError:
            raise SandboxBusyError(
                f"no free sandbox within {self.queue_timeout_s:g} s ({self.size} runs at once): too many runs queued"
            ) from None
        try:
            i = next(self._turn) % self._count
            try:
                return await (await self._launcher(i)).run(program, limits)
            except LauncherGoneError:  # its launcher died before taking the job: a new one takes it
                return await (await self._launcher(i)).run(program, limits)
        finally:
            self._slots.release()

    async def open(self, program: Program, limits: Limits = Limits(), *, client: str = "") -> OpenRun:
        """Start a program kept running (a session's interpreter) in one of the launchers: one
        of `max_open` places, at most `max_open_per_client` of them `client`'s (the session's
        Session.client); SandboxBusyError past either; freed by its `close`."""
        if self._closed:
            raise RuntimeError("the sandbox pool is closed")
        if sum(self._open.values()) >= self.max_open:
            raise SandboxBusyError(f"{self.max_open} sandboxed programs kept running already (the pool's max_open): close a session first")
        if self._open[client] >= self.max_open_per_client:
            raise SandboxBusyError(
                f"{self.max_open_per_client} sandboxed programs kept running for client {client or '(unknown)'} already "
                "(the pool's max_open_per_client): close a session first"
            )  # fmt: skip
        self._bind()
        self._open[client] += 1
        try:
            run = await (await self._launcher(next(self._turn) % self._count)).open(program, limits)
        except BaseException:
            self._closed_one(client)
            raise
        run.on_close(lambda: self._closed_one(client))
        return run

    def _closed_one(self, client: str) -> None:
        self._open[client] -= 1
        if self._open[client] <= 0:
            del self._open[client]

    async def aclose(self) -> None:
        """Stop the launchers (runs still in progress are killed)."""
        self._closed = True
        launchers = [launcher for launcher in self._launchers if launcher is not None]
        self._launchers = [None] * self._count
        await asyncio.gather(*(launcher.aclose() for launcher in launchers), return_exceptions=True)
        if self._cgroups is not None:
            cgroups, self._cgroups = self._cgroups, None
            await asyncio.to_thread(cgroups.remove)  # its last runners may take a moment to leave
