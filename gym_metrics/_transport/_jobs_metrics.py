"""Prometheus metrics of a job server (`jobs serve --prometheus-port`): jobs by state and
rows done / failed, read from the job store at each scrape (so they are right after a restart
too). Needs the optional `prometheus_client` (`pip install 'gym-metrics[prometheus]'`)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from typing import Any

from gym_metrics.errors import GymMetricsError
from gym_metrics.jobs import JobState, JobStore

PAGE = 1000


class PrometheusMissingError(GymMetricsError):
    """--prometheus-port was given but prometheus_client is not installed (exit code 2)."""

    exit_code = 2


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


def _totals(store: JobStore) -> tuple[dict[JobState, int], int, int]:
    """Jobs per state and rows done / failed over every job, a page of jobs at a time."""
    states = {state: 0 for state in JobState}
    done = failed = 0
    after: str | None = None
    while True:
        page = store.list_jobs(limit=PAGE, after=after)
        for record in page:
            states[record.state] += 1
            done, failed = done + record.done, failed + record.failed
        if len(page) < PAGE:
            return states, done, failed
        after = page[-1].id


class _JobCollector:
    def __init__(self, store: JobStore) -> None:
        self.store = store

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        states, done, failed = _totals(self.store)
        jobs = GaugeMetricFamily("gym_metrics_jobs", "Jobs in the store by state", labels=["state"])
        for state, count in states.items():
            jobs.add_metric([state.value], count)
        yield jobs
        yield CounterMetricFamily("gym_metrics_job_rows_done", "Rows with a stored result (failed rows included)", value=done)
        yield CounterMetricFamily("gym_metrics_job_rows_failed", "Rows whose result is a row error", value=failed)


def start_metrics(store: JobStore, host: str, port: int) -> tuple[int, Callable[[], None]]:
    """Serve /metrics on host:port (0 picks a port) in a thread; returns the port and a stop."""
    check_prometheus()
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_JobCollector(store))
    server, thread = start_http_server(port, addr=host.strip("[]"), registry=registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return int(server.server_port), stop


__all__ = ["PrometheusMissingError", "check_prometheus", "start_metrics"]
