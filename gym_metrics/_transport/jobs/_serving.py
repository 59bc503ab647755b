"""The job server: JobService over a JobExecutor on the shared bootstrap (auth, TLS, health,
reflection, access log), and running it as a process until SIGTERM. On shutdown the running
jobs stop and go back to QUEUED, so the next start on the same database resumes them."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from grpc import aio

from gym_metrics._transport.server._health import HealthServicer
from gym_metrics._transport.jobs._metrics import check_prometheus, start_metrics
from gym_metrics._transport.server._metrics import ServerMetrics
from gym_metrics._transport.jobs._servicer import SERVICE, JobsServicer, add_job_service
from gym_metrics._transport.server._server import AUTH_TOKEN_ENV, RunningGrpcServer, ServerConfig, add_health_and_reflection, bind, new_server
from gym_metrics._transport.server._serving import _add_signal_handlers, _ensure_log_handler, _remove_signal_handlers, let_cancelled_calls_end
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.jobs import JobExecutor, JobService, JobStore, ProgressHub, SecretStore

log = logging.getLogger("gym_metrics.server")

_SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass
class JobServerOptions:
    """What the job server runs on: `jobs serve`'s flags beyond the ServerConfig ones."""

    db: Path
    max_jobs: int = 2
    data_root: Path | None = None
    secrets_file: Path | None = None
    secret_env: dict[str, list[str] | None] = field(default_factory=dict)
    """Environment variables jobs may use as secrets, each with the hosts it may go to."""
    max_parallelism: int = 128
    prometheus_port: int | None = None


@dataclass(kw_only=True)
class RunningJobServer(RunningGrpcServer):
    """A started job server; `stop()` drains calls, then stops the jobs (they stay resumable)."""

    executor: JobExecutor
    servicer: JobsServicer

    async def _draining(self) -> None:
        self.servicer.jobs.close()  # open WatchJob streams end with UNAVAILABLE

    async def _release(self) -> None:
        await self.executor.aclose()
        await super()._release()
        self.executor.store.close()


def _within(path: Path | None, root: Path | None) -> bool:
    """Whether `path` (or a file SQLite keeps beside it) is one a job could name as its dataset."""
    if path is None or root is None:
        return False
    return path.resolve().parent.is_relative_to(root.resolve())


def _check(options: JobServerOptions) -> None:
    readable = "is under --data-root, where any job may read it as its dataset (every job's rows and results, or the secrets): keep it outside"
    problems = [
        ("max_jobs", "must be >= 1", options.max_jobs < 1),
        ("max_parallelism", "must be >= 1", options.max_parallelism < 1),
        ("data_root", f"{options.data_root} is not a directory", options.data_root is not None and not options.data_root.is_dir()),
        ("db", f"{options.db} {readable}", _within(options.db, options.data_root)),
        ("secrets_file", f"{options.secrets_file} {readable}", _within(options.secrets_file, options.data_root)),
        ("prometheus_port", "must be in 0..65535", options.prometheus_port is not None and not 0 <= options.prometheus_port <= 65535),
    ]  # fmt: skip
    violations = [FieldViolation(name, why) for name, why, bad in problems if bad]
    if violations:
        raise InvalidInputError("invalid job server config", violations)
    if options.prometheus_port is not None:
        check_prometheus()


async def start_job_server(config: ServerConfig, options: JobServerOptions) -> RunningJobServer:
    """Open the store, bind, start serving, then start the executor (which resumes jobs a
    previous process left QUEUED or RUNNING). Bad options fail before anything is bound."""
    _check(options)
    secrets = SecretStore(options.secrets_file, allow_env=options.secret_env)  # a file refused unless mode 0600
    store = JobStore(options.db)
    hub = ProgressHub()
    executor = JobExecutor(
        store, max_jobs=options.max_jobs, data_root=options.data_root, secrets=secrets, on_progress=hub,
        max_parallelism=options.max_parallelism,
    )  # fmt: skip
    servicer = JobsServicer(JobService(executor, hub))
    metrics = ServerMetrics("jobs") if options.prometheus_port is not None else None  # RPCs of the job service
    server = new_server(config, metrics=metrics)
    add_job_service(servicer, server)
    health = await add_health_and_reflection(server, config, SERVICE)
    try:
        port = bind(server, config)
    except OSError:
        store.close()
        raise
    await server.start()
    hub.bind(asyncio.get_running_loop())
    running = RunningJobServer(server=server, port=port, config=config, health=health, executor=executor, servicer=servicer)
    try:
        if options.prometheus_port is not None:
            running.metrics_port, running._stop_metrics = start_metrics(store, config.host, options.prometheus_port, metrics)
        await executor.start()
    except BaseException:
        await running.stop(0)
        raise
    return running


def serve_jobs(config: ServerConfig, options: JobServerOptions) -> None:
    """Serve jobs until SIGTERM or SIGINT, then stop gracefully. Blocks. Prints "... listening
    on HOST:PORT" on stderr once bound (a parent process reads the port from it)."""
    if config.auth_token is None and os.environ.get(AUTH_TOKEN_ENV):
        config = dataclasses.replace(config, auth_token=os.environ[AUTH_TOKEN_ENV].strip())  # as read_token reads it
    _ensure_log_handler()
    asyncio.run(_serve_async(config, options))


async def _serve_async(config: ServerConfig, options: JobServerOptions) -> None:
    running = await start_job_server(config, options)
    loop = asyncio.get_running_loop()
    requested = asyncio.Event()
    force: list[asyncio.Task[None]] = []

    def on_signal(signum: signal.Signals) -> None:
        if not requested.is_set():
            log.info("gym-metrics: %s received, shutting down (grace %.1fs)", signum.name, config.grace_seconds)
            requested.set()
        else:
            log.warning("gym-metrics: %s received again, cancelling in-flight calls", signum.name)
            force.append(loop.create_task(running.server.stop(0)))

    _add_signal_handlers(loop, _SHUTDOWN_SIGNALS, on_signal)
    extras = [f"pid {os.getpid()}", f"db {options.db}", *(["tls"] if config.tls else []), *(["auth"] if config.auth_token else [])]
    if running.metrics_port is not None:
        extras.append(f"metrics on port {running.metrics_port}")
    sys.stderr.write(f"gym-metrics: job server listening on {running.address} ({', '.join(extras)})\n")
    sys.stderr.flush()
    try:
        await requested.wait()
        await running.stop(config.grace_seconds)
        for task in force:
            await task
        await let_cancelled_calls_end()
    finally:
        _remove_signal_handlers(loop, _SHUTDOWN_SIGNALS)
    log.info("gym-metrics: job server stopped")


__all__ = ["JobServerOptions", "RunningJobServer", "serve_jobs", "start_job_server"]
