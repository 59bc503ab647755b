"""`collect --pushgateway URL`: the collector's counters pushed to a Prometheus Pushgateway,
every `interval` seconds while it runs (in a thread, never blocking the collection) and once
at the end. A batch job has no port to scrape: the gateway keeps its last push.

Grouping key: job `gym_metrics_collect`, instance = the output's stem (a name the user chose;
no row content, no secret, no URL)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from gym_metrics._util.masking import scrub, without_url_credentials
from gym_metrics.errors import ExitCode, GymMetricsError
from gym_metrics.exporters._base import ExporterMissingError, _importable

JOB = "gym_metrics_collect"
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class CollectCounters:
    """One snapshot of a collection. The `None` fields are known only at the end."""

    rollouts_done: int
    """Rollouts written so far (answered by the server, or already scored and passed through)."""
    verify_failed: int
    generation_failed: int
    generated: int
    duration_s: float
    rollouts_sent: int | None = None
    """Rollouts the server answered (failed verifies included)."""
    passed_through: int | None = None
    batches: int | None = None
    finished: bool = False


class _Snapshot:
    """A prometheus_client collector yielding one snapshot (a fresh registry per push)."""

    def __init__(self, counters: CollectCounters) -> None:
        self.c = counters

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        c = self.c
        yield CounterMetricFamily("gym_metrics_collect_rollouts_done", "Rollouts written (verified or passed through)", value=c.rollouts_done)
        failed = CounterMetricFamily("gym_metrics_collect_rollouts_failed", "Rollouts that failed", labels=["error_kind"])
        failed.add_metric(["verify"], c.verify_failed)
        failed.add_metric(["generation"], c.generation_failed)
        yield failed
        yield CounterMetricFamily("gym_metrics_collect_rollouts_generated", "Rollouts the policy answered", value=c.generated)
        for name, value, what in (
            ("rollouts_sent", c.rollouts_sent, "Rollouts the server answered (at the end)"),
            ("rollouts_passed_through", c.passed_through, "Rollouts already scored in the input (at the end)"),
            ("batches", c.batches, "Verify batches answered (at the end)"),
        ):
            if value is not None:
                yield CounterMetricFamily(f"gym_metrics_collect_{name}", what, value=value)
        yield GaugeMetricFamily("gym_metrics_collect_duration_seconds", "Seconds since the collection started", value=c.duration_s)
        yield GaugeMetricFamily("gym_metrics_collect_finished", "1 once the collection ended", value=int(c.finished))
        yield GaugeMetricFamily("gym_metrics_collect_last_push_timestamp_seconds", "When this push was made", value=time.time())


class PushgatewayError(GymMetricsError):
    """The final push failed (the metrics file is written: exit 1)."""

    exit_code = ExitCode.FAILED


class Pusher:
    """Pushes snapshots to `url` under (job, instance). `maybe_push` is for the periodic
    pushes: at most one in flight, every `interval` seconds, errors remembered (the first is
    printed by the caller once); `push` is the final, synchronous one."""

    def __init__(self, url: str, instance: str, interval: float = 10.0) -> None:
        """A user and password in `url` (`https://user:pass@host`) are sent as basic auth, never
        in the URL, and masked in every message."""
        parts = urlsplit(url if "://" in url else f"http://{url}")
        try:
            user, password = parts.username, parts.password
        except ValueError:
            user = password = None
        self._auth = None if user is None else (unquote(user), unquote(password or ""))
        host = parts.netloc.rpartition("@")[2]
        self.url = urlunsplit(parts._replace(netloc=host)) if self._auth else url
        self.instance, self.interval = instance, interval
        self._last = time.monotonic()
        self._thread: threading.Thread | None = None
        self.periodic_error: str | None = None

    @staticmethod
    def check_installed() -> None:
        """ExporterMissingError (exit 2) when prometheus_client is not installed."""
        if not _importable("prometheus_client"):
            raise ExporterMissingError(
                "--pushgateway needs prometheus_client, which is not installed: pip install 'gym-metrics[prometheus]'"
            )

    def push(self, counters: CollectCounters) -> None:
        """Push now; PushgatewayError naming the gateway's answer when it fails."""
        from prometheus_client import CollectorRegistry, push_to_gateway
        from prometheus_client.exposition import basic_auth_handler

        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Snapshot(counters))
        extra: dict[str, Any] = {}
        if self._auth is not None:
            user, password = self._auth

            def handler(url: str, method: str, timeout: float | None, headers: list[tuple[str, str]], data: bytes) -> Callable[[], None]:
                return basic_auth_handler(url, method, timeout, headers, data, user, password)

            extra["handler"] = handler
        try:
            push_to_gateway(self.url, job=JOB, registry=registry, grouping_key={"instance": self.instance}, timeout=TIMEOUT_S, **extra)
        except Exception as exc:
            said = scrub(without_url_credentials(f"{type(exc).__name__}: {exc}"), self._auth[1] if self._auth else None)
            raise PushgatewayError(f"push to the pushgateway failed: {said}") from None

    def maybe_push(self, counters: CollectCounters) -> None:
        now = time.monotonic()
        if now - self._last < self.interval or (self._thread is not None and self._thread.is_alive()):
            return
        self._last = now
        self._thread = threading.Thread(target=self._push_quietly, args=(counters,), name="gym-metrics-push", daemon=True)
        self._thread.start()

    def _push_quietly(self, counters: CollectCounters) -> None:
        try:
            self.push(counters)
        except PushgatewayError as exc:
            self.periodic_error = self.periodic_error or str(exc)

    def wait(self) -> None:
        """Let a periodic push in flight finish (so the final one is the last)."""
        if self._thread is not None:
            self._thread.join(TIMEOUT_S + 1)
