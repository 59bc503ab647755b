"""Prometheus metrics of the servers (`serve --prometheus-port`, `jobs serve --prometheus-port`):
RPCs by method and status code, rollouts verified / failed, aggregations and requests in
flight; the job server adds its job states (`_jobs_metrics`). Needs the optional
`prometheus_client` (`pip install 'gym-metrics[prometheus]'`), imported only when asked for.

Label values are bounded and never carry a request's content: method names from our own
service descriptors ("unknown" for anything else), status code names, the environment's name,
verify error kinds."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from gym_metrics.errors import ExitCode, GymMetricsError

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""RPC latency buckets (seconds): a unary Verify is ~1 ms, an AggregateMetrics call minutes."""
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
UNKNOWN = "unknown"


class PrometheusMissingError(GymMetricsError):
    """--prometheus-port was given but prometheus_client is not installed (exit code 2)."""

    exit_code = ExitCode.BAD_INPUT


def check_prometheus() -> None:
    """Refuse before anything is bound when the extra is missing."""
    try:
        found = importlib.util.find_spec("prometheus_client") is not None
    except ValueError:  # a module set to None in sys.modules (how tests hide it)
        found = False
    if not found:
        raise PrometheusMissingError(
            "--prometheus-port needs prometheus_client, which is not installed: pip install 'gym-metrics[prometheus]'"
        )


def known_methods() -> frozenset[str]:
    """Every RPC path our servers answer: the only values the `method` label takes (a client
    can send any path; it must not mint a new time series per made-up name)."""
    from grpc_health.v1 import health_pb2
    from grpc_reflection.v1alpha import reflection_pb2

    from gym_metrics.v1 import jobs_pb2, resources_pb2

    paths: set[str] = set()
    for module in (resources_pb2, jobs_pb2, health_pb2, reflection_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            names = [service.full_name]
            if service.full_name.startswith("grpc.reflection.v1alpha."):  # served under v1 too
                names.append(service.full_name.replace(".v1alpha.", ".v1."))
            paths.update(f"/{name}/{m.name}" for name in names for m in service.methods)
    return frozenset(paths)


class ServerMetrics:
    """The metric families one server process records into (its own registry). In a worker
    of `serve --workers N` (prometheus_client's multiprocess mode) the values go to files the
    parent process sums at each scrape; gauges are summed over live workers."""

    def __init__(self, environment: str = "") -> None:
        check_prometheus()
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry(auto_describe=False)
        self.environment = environment or UNKNOWN
        self.methods = known_methods()
        r = self.registry
        self.rpcs = Counter("gym_metrics_rpcs", "Finished RPCs", ["method", "code"], registry=r)
        self.latency = Histogram(
            "gym_metrics_rpc_duration_seconds", "RPC duration, from the handler's start to its end",
            ["method", "code"], buckets=BUCKETS, registry=r,
        )  # fmt: skip
        self.in_flight = Gauge(
            "gym_metrics_rpcs_in_flight", "RPCs being handled", ["method"], registry=r, multiprocess_mode="livesum"
        )  # fmt: skip
        self.verified = Counter(
            "gym_metrics_rollouts_verified", "Rollouts verified without error", ["environment"], registry=r
        )  # fmt: skip
        self.failed = Counter(
            "gym_metrics_rollouts_failed", "Rollouts whose verify failed", ["environment", "error_kind"], registry=r
        )  # fmt: skip
        self.rollouts_in_flight = Gauge(
            "gym_metrics_verify_rollouts_in_flight", "Rollouts received by VerifyStream and not yet answered (queue depth)",
            ["environment"], registry=r, multiprocess_mode="livesum",
        )  # fmt: skip
        self.aggregations = Gauge(
            "gym_metrics_aggregations_in_flight", "AggregateMetrics calls running", ["environment"],
            registry=r, multiprocess_mode="livesum",
        )  # fmt: skip

    def method(self, path: str) -> str:
        return path if path in self.methods else UNKNOWN

    def rollouts(self, verified: int, failed: Mapping[str, int] | None = None) -> None:
        """Count one batch's outcome (failed: error kind -> rollouts)."""
        if verified:
            self.verified.labels(self.environment).inc(verified)
        for kind, n in (failed or {}).items():
            self.failed.labels(self.environment, kind).inc(n)

    def queued(self, rollouts: int) -> None:
        """Rollouts received by VerifyStream and not yet answered: +n on arrival, -n when answered."""
        self.rollouts_in_flight.labels(self.environment).inc(rollouts)

    def aggregating(self, change: int) -> None:
        """AggregateMetrics calls running: +1 when one starts, -1 when it ends."""
        self.aggregations.labels(self.environment).inc(change)


def serve_http(registry: Any, host: str, port: int) -> tuple[int, Callable[[], None]]:
    """Serve `registry` as /metrics on host:port (0 picks a port) in a thread; the bound port
    and a stop."""
    from prometheus_client import start_http_server

    server, thread = start_http_server(port, addr=host.strip("[]"), registry=registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return int(server.server_port), stop


def start_multiprocess_http(host: str, port: int) -> tuple[int, Callable[[], None]]:
    """For `serve --workers N`, before the workers fork: a fresh multiprocess directory
    (PROMETHEUS_MULTIPROC_DIR, read by prometheus_client when first imported, so this must run
    before any import of it), and /metrics serving the sum over the workers. The stop removes
    the directory."""
    check_prometheus()
    if "prometheus_client" in sys.modules and MULTIPROC_ENV not in os.environ:
        raise GymMetricsError("--workers with --prometheus-port: prometheus_client was imported before the workers were set up")
    directory = tempfile.mkdtemp(prefix="gym-metrics-prometheus-")
    os.environ[MULTIPROC_ENV] = directory
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry(auto_describe=False)
    MultiProcessCollector(registry, path=directory)
    bound, stop_http = serve_http(registry, host, port)

    def stop() -> None:
        stop_http()
        shutil.rmtree(directory, ignore_errors=True)

    return bound, stop


__all__ = [
    "PrometheusMissingError",
    "ServerMetrics",
    "check_prometheus",
    "known_methods",
    "serve_http",
    "start_multiprocess_http",
]
