"""Running a server as a process: `serve()` until SIGTERM / SIGINT with a graceful drain, and
worker processes sharing one port."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from gym_metrics._util.aio import run_past_exits
from gym_metrics._util.grpc_fork import FORK_SUPPORT_ENV, grpc_fork_handlers_off
from gym_metrics._util.limits import raise_open_files
from gym_metrics._util.masking import MaskingFilter
from gym_metrics._transport.server._metrics import start_multiprocess_http
from gym_metrics._transport.server._server import (
    AUTH_TOKEN_ENV,
    EnvTarget,
    ServerConfig,
    load_env,
    start_server,
)
from gym_metrics.errors import ExitCode, FieldViolation, GymMetricsError, InvalidInputError
from gym_metrics.environments import SimpleResourcesServer

log = logging.getLogger("gym_metrics.server")

_SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def serve(
    target: EnvTarget,
    config: ServerConfig | None = None,
    *,
    workers: int = 1,
    reducers: Sequence[str] | None = None,
    metrics: Sequence[str] | None = None,
    **overrides: Any,
) -> None:
    """Serve `target` until SIGTERM or SIGINT, then shut down gracefully. Blocks.

    `reducers` (reward reducer names; `metrics` is its old name) replaces the environment's list.
    `overrides` replace fields of `config` (e.g. `port=0`). Prints
    "... listening on HOST:PORT" to stderr once bound, so a parent process can read the port.
    A second signal cuts the grace period short. With `workers > 1`, that many processes
    share one port through SO_REUSEPORT (one server process uses one core); with port 0 the
    parent picks the port once and keeps it reserved, and prints the one "listening on" line
    when every worker is up.

    A verify that forks (math-verify's timeout) needs grpc imported with its fork handlers
    off: `gym-metrics serve` and `gym_metrics.serve` see to that before importing grpc (this
    module imports it); otherwise set GRPC_ENABLE_FORK_SUPPORT=0 first, or a warning says so
    at the first fork.
    """
    config = dataclasses.replace(config or ServerConfig(), **overrides)
    if config.auth_token is None and os.environ.get(AUTH_TOKEN_ENV):
        config = dataclasses.replace(config, auth_token=os.environ[AUTH_TOKEN_ENV].strip())  # as read_token reads it
    if workers < 1:
        raise InvalidInputError("invalid server config", [FieldViolation("workers", f"must be >= 1, got {workers}")])
    env = load_env(target, reducers, metrics=metrics)  # resolve once, in the parent, so a bad target fails before forking
    _ensure_log_handler()
    raise_open_files()  # a connection is a file: the soft limit must not be what a flood of them meets first
    if workers == 1:
        run_past_exits(_serve_async(env, config, reuse_port=False, signals=_SHUTDOWN_SIGNALS, label=""), _exit_survived)
    else:
        _serve_workers(env, config, workers)


async def _serve_async(
    env: SimpleResourcesServer,
    config: ServerConfig,
    *,
    reuse_port: bool,
    signals: tuple[signal.Signals, ...],
    label: str,
    parent_pid: int | None = None,
    ready: multiprocessing.connection.Connection | None = None,
    worker: str = "",
) -> None:
    running = await start_server(
        env, config, reuse_port=reuse_port, servicer_options={"worker": worker} if worker else None,
        serve_metrics=not worker,  # a worker's parent serves the sum over workers
    )  # fmt: skip
    loop = asyncio.get_running_loop()
    requested = asyncio.Event()
    force_tasks: list[asyncio.Task[None]] = []
    where = f" ({label})" if label else ""

    def on_signal(signum: signal.Signals) -> None:
        if not requested.is_set():
            log.info("gym-metrics: %s received, shutting down (grace %.1fs)%s", signum.name, config.grace_seconds, where)
            requested.set()
        else:
            log.warning("gym-metrics: %s received again, cancelling in-flight calls%s", signum.name, where)
            force_tasks.append(loop.create_task(running.server.stop(0)))

    _add_signal_handlers(loop, signals, on_signal)
    _ForkWatch.arm()
    gc.freeze()  # what start-up loaded (grpc, the environment's models) is left out of the collector's full passes
    extras = [f"pid {os.getpid()}", *([label] if label else []), *(["tls"] if config.tls else []),
              *(["auth"] if config.auth_token else []),
              *([f"metrics on port {running.metrics_port}"] if running.metrics_port is not None else []),
              *([f"MCP on http://{config.address(running.mcp_port)}/mcp"] if getattr(running, "mcp_port", None) is not None else []),
              *([f"rewards over HTTP on port {running.http_port}"] if getattr(running, "http_port", None) is not None else []),
              *([f"agent /run on port {running.agent_http_port}"] if getattr(running, "agent_http_port", None) is not None else [])]
    # One write per line: workers share stderr, and a parent process parses the "listening on"
    # line; a worker's parent prints it once every worker is up.
    verb = "serving on" if ready is not None else "listening on"
    sys.stderr.write(f"gym-metrics: {env.server_name()} {verb} {running.address} ({', '.join(extras)})\n")
    sys.stderr.flush()
    if ready is not None:
        ready.send(running.port)
        ready.close()
    orphan_watch = loop.create_task(_watch_parent(parent_pid, requested, where)) if parent_pid else None
    try:
        await requested.wait()
        await running.stop(config.grace_seconds)
        for task in force_tasks:
            await task
        await let_cancelled_calls_end()
    finally:
        if orphan_watch is not None:
            orphan_watch.cancel()
        _remove_signal_handlers(loop, signals)
        _ForkWatch.armed = False
    log.info("gym-metrics: stopped%s", where)


async def let_cancelled_calls_end(within_s: float = 1.0) -> None:
    """Let grpc's tasks of calls cancelled at the end of the grace finish their cancellation: one
    still pending when the event loop closes is cancelled again, and grpc prints its traceback."""
    calls = [t for t in asyncio.all_tasks() if getattr(t.get_coro(), "__name__", "") == "_schedule_rpc_coro"]
    if calls:
        await asyncio.wait(calls, timeout=within_s)


class _ForkWatch:
    """One warning per process when a serving process forks while grpc's fork handlers are on
    (grpc was imported before `serve` could turn them off): the child may die of SIGSEGV."""

    armed = False
    registered = False

    @classmethod
    def arm(cls) -> None:
        if grpc_fork_handlers_off() or not hasattr(os, "register_at_fork"):
            return
        cls.armed = True
        if not cls.registered:  # a hook cannot be removed: one per process, armed while serving
            cls.registered = True
            os.register_at_fork(before=cls._before_fork)

    @classmethod
    def _before_fork(cls) -> None:
        if cls.armed:
            cls.armed = False
            log.warning(
                "gym-metrics: the server forked while grpc's fork handlers are on (%s is set on, or grpc was "
                "imported before serve could turn them off); the child may crash (SIGSEGV). Set %s=0 before "
                "grpc is imported, or serve with `gym-metrics serve` or gym_metrics.serve()",
                FORK_SUPPORT_ENV, FORK_SUPPORT_ENV,
            )


async def _watch_parent(parent_pid: int, requested: asyncio.Event, where: str) -> None:
    """Shut a worker down when its parent dies (SIGKILL, OOM), so no orphan keeps the port."""
    while os.getppid() == parent_pid:
        await asyncio.sleep(0.5)
    log.warning("gym-metrics: parent process %d is gone, shutting down%s", parent_pid, where)
    requested.set()


def _add_signal_handlers(
    loop: asyncio.AbstractEventLoop, signals: tuple[signal.Signals, ...], callback: Any
) -> None:
    for sig in signals:
        try:
            loop.add_signal_handler(sig, callback, sig)
        except NotImplementedError:  # Windows: no loop signal handlers
            signal.signal(sig, lambda signum, frame: loop.call_soon_threadsafe(callback, signal.Signals(signum)))
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)  # a worker starts with them blocked


def _remove_signal_handlers(loop: asyncio.AbstractEventLoop, signals: tuple[signal.Signals, ...]) -> None:
    for sig in signals:
        try:
            loop.remove_signal_handler(sig)
        except NotImplementedError:
            signal.signal(sig, signal.SIG_DFL if sig != signal.SIGINT else signal.default_int_handler)


def _serve_workers(env: SimpleResourcesServer, config: ServerConfig, workers: int) -> None:
    """Fork `workers` servers on one port; forward SIGTERM/SIGINT to them as SIGTERM.

    Any worker exiting brings the others down, so a supervisor sees one failure and restarts.
    """
    if "fork" not in multiprocessing.get_all_start_methods() or not hasattr(signal, "pthread_sigmask"):
        raise GymMetricsError("workers > 1 needs a POSIX system with fork() and SO_REUSEPORT")
    ctx = multiprocessing.get_context("fork")
    reserved = _reserve_port(config) if config.port == 0 else None
    if reserved is not None:
        config = dataclasses.replace(config, port=reserved.getsockname()[1])
    metrics_port, stop_metrics = (
        start_multiprocess_http(config.host, config.prometheus_port) if config.prometheus_port is not None else (None, None)
    )
    ready_r, ready_w = ctx.Pipe(duplex=False)
    group = _Workers([
        ctx.Process(
            target=_worker_main, args=(env, config, i + 1, workers, os.getpid(), ready_w),
            name=f"gym-metrics-worker-{i + 1}",
        )
        for i in range(workers)
    ])  # fmt: skip
    # Children start with the signals blocked and unblock them once their handlers are in.
    signal.pthread_sigmask(signal.SIG_BLOCK, _SHUTDOWN_SIGNALS)
    previous = {sig: signal.signal(sig, group.forward) for sig in _SHUTDOWN_SIGNALS}
    sys.stderr.flush()
    try:
        for proc in group.procs:
            proc.start()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SHUTDOWN_SIGNALS)
        ready_w.close()
        extras = f"pid {os.getpid()}, {workers} workers" + (", tls" if config.tls else "")
        extras += f", metrics on port {metrics_port}" if metrics_port is not None else ""
        group.supervise(ready_r, f"gym-metrics: {env.server_name()} listening on {config.address()} ({extras})\n")
    finally:
        ready_r.close()
        if reserved is not None:
            reserved.close()
        if stop_metrics is not None:
            stop_metrics()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SHUTDOWN_SIGNALS)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if group.start_failed is not None:
        error = GymMetricsError(group.start_failed.message)
        error.exit_code = group.start_failed.exit_code  # type: ignore[attr-defined]
        raise error
    failed = [p for p in group.procs if p.exitcode != 0]
    if failed:
        raise WorkersFailedError("gym-metrics workers failed: " + ", ".join(f"{p.name} (exit code {p.exitcode})" for p in failed))


class WorkersFailedError(GymMetricsError):
    """A worker died serving (killed, crashed) or before it was up: a failure, not bad input."""

    exit_code = ExitCode.FAILED


@dataclasses.dataclass(frozen=True)
class _StartFailed:
    """What a worker that could not start sends its parent instead of its port."""

    message: str
    exit_code: int


class _Workers:
    """The worker processes of one `serve`, and whether they are being stopped."""

    def __init__(self, procs: list[Any]) -> None:
        self.procs = procs
        self.stopping = False
        self.start_failed: _StartFailed | None = None

    def forward(self, signum: int, frame: FrameType | None) -> None:
        """SIGTERM to every worker still running (a signal handler)."""
        self.stopping = True
        for proc in self.procs:
            if proc.pid is not None and proc.exitcode is None:
                os.kill(proc.pid, signal.SIGTERM)

    def supervise(self, ready: multiprocessing.connection.Connection, listening_line: str) -> None:
        """Print `listening_line` once every worker reports it is up; wait for all to exit,
        stopping the others as soon as one exits on its own."""
        waiting: multiprocessing.connection.Connection | None = ready
        up = 0
        pending = list(self.procs)
        while pending:
            waits: list[Any] = [p.sentinel for p in pending] + ([waiting] if waiting else [])
            woken = multiprocessing.connection.wait(waits)  # blocks until a worker reports or exits
            if waiting is not None and waiting in woken:
                try:
                    said = waiting.recv()
                    ended = False
                    if isinstance(said, _StartFailed):
                        self.start_failed = self.start_failed or said
                    else:
                        up += 1
                except EOFError:  # every worker has sent or exited
                    ended = True
                if up == len(self.procs) or ended:
                    waiting = None
                    if up == len(self.procs) and not self.stopping:
                        sys.stderr.write(listening_line)  # one write: a parent process parses it
                        sys.stderr.flush()
            for proc in [p for p in pending if p.exitcode is not None]:
                pending.remove(proc)
                if not self.stopping and self.start_failed is None:
                    log.warning("gym-metrics: %s exited with code %s; stopping the others", proc.name, proc.exitcode)
                    self.forward(signal.SIGTERM, None)


def _reserve_port(config: ServerConfig) -> socket.socket:
    """A SO_REUSEPORT socket bound (not listening, so it takes no connections) to a free port
    of `config.host`: the workers bind the same port, and nobody else can while it is held."""
    host = config.host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, 0))
    except OSError as exc:
        sock.close()
        raise OSError(f"gym-metrics cannot reserve a port on {config.host}: {exc}") from None
    return sock


def _worker_main(
    env: SimpleResourcesServer,
    config: ServerConfig,
    index: int,
    workers: int,
    parent_pid: int,
    ready: multiprocessing.connection.Connection,
) -> None:
    # The parent turns Ctrl-C (sent to the whole process group) into one SIGTERM per worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT,))
    try:
        run_past_exits(
            _serve_async(
                env, config, reuse_port=True, signals=(signal.SIGTERM,), label=f"worker {index}/{workers}",
                parent_pid=parent_pid, ready=ready, worker=f"{index}/{workers}",
            ),
            _exit_survived,
        )  # fmt: skip
    except GymMetricsError as exc:  # (astart failed, the port is taken, ...): the parent says it once, as one process would
        code = int(getattr(exc, "exit_code", None) or 2)  # (the command's rule: bad input unless it says)
        if not ready.closed:
            ready.send(_StartFailed(str(exc), code))
        sys.exit(code)
    leave_stuck_threads(min(config.grace_seconds, 2.0))


def leave_stuck_threads(wait_s: float) -> None:
    """After the server stopped: threads the environment's code left running (a verify's
    `asyncio.to_thread` past its timeout, a thread of its own) are waited for `wait_s`, then
    named and left: the process ends without them (Python would join them at exit, and a
    SIGTERMed server said "stopped" and never ended)."""
    deadline = time.monotonic() + wait_s
    for thread in _stuck_threads():
        thread.join(max(0.0, deadline - time.monotonic()))
    stuck = _stuck_threads()
    if not stuck:
        return
    log.warning("gym-metrics: %d thread(s) of the environment's code still running (%s): exiting without them",
                len(stuck), ", ".join(t.name for t in stuck))  # fmt: skip
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # (the server stopped as asked: its exit code)


def _stuck_threads() -> list[threading.Thread]:
    main = threading.main_thread()
    return [t for t in threading.enumerate() if t is not main and t.is_alive() and not t.daemon]


def _exit_survived(exc: SystemExit) -> None:
    log.error("the environment's code raised SystemExit(%r) in a task of its own; the server serves on (the call it was part of "
              "may go unanswered until its deadline: catch it in the environment, or raise an exception instead)", exc.code)  # fmt: skip


def _ensure_log_handler() -> None:
    """Access and lifecycle logs to stderr, unless the application configured logging."""
    package = logging.getLogger("gym_metrics")
    if logging.getLogger().handlers or package.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.addFilter(MaskingFilter())
    package.addHandler(handler)
    package.setLevel(logging.INFO)
