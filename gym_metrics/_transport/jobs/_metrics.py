"""Prometheus metrics of a job server (`jobs serve --prometheus-port`): jobs by state and
rows done / failed, read from the job store at each scrape (so they are right after a restart
too), beside the RPC metrics every server records (`_metrics`, one registry)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from gym_metrics._transport.server._metrics import PrometheusMissingError, ServerMetrics, check_prometheus, serve_http
from gym_metrics.jobs import JobState, JobStore

PAGE = 1000


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


def start_metrics(
    store: JobStore, host: str, port: int, metrics: ServerMetrics | None = None
) -> tuple[int, Callable[[], None]]:
    """Serve /metrics on host:port (0 picks a port) in a thread: the job states, and the RPC
    metrics of `metrics` when given; returns the port and a stop."""
    check_prometheus()
    if metrics is None:
        from prometheus_client import CollectorRegistry

        registry = CollectorRegistry(auto_describe=False)
    else:
        registry = metrics.registry
    registry.register(_JobCollector(store))
    return serve_http(registry, host, port)


__all__ = ["PrometheusMissingError", "check_prometheus", "start_metrics"]
