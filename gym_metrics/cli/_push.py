"""`collect --pushgateway URL`: the collector's counters pushed to a Prometheus Pushgateway
while it runs and at the end (gym_metrics.exporters.Pusher), fed by the collection's progress
counter. Imported when collect runs (it loads the collector); the flag is in `_export`."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from gym_metrics.cli._export import PUSH_INTERVAL_S
from gym_metrics.errors import ExitCode
from gym_metrics.collector import Progress, estimate_total
from gym_metrics.exporters import CollectCounters


class PushingProgress(Progress):
    """The collector's progress counter, pushing a snapshot every `pusher.interval` seconds."""

    def __init__(self, total: int | None, pusher: Any) -> None:
        super().__init__(total)
        self.pusher = pusher

    def counters(self, result: Any = None) -> Any:
        if result is None:
            return CollectCounters(
                rollouts_done=self.done, verify_failed=self.errors - self.generation_failed,
                generation_failed=self.generation_failed, generated=self.generated_ok, duration_s=time.monotonic() - self.started,
            )  # fmt: skip
        # the end: the run's own counts (with --processes or --ray the shards counted, not this)
        batches = sum(result.batches_by_server.values()) if result.batches_by_server else None
        return CollectCounters(
            rollouts_done=result.rollouts_done, verify_failed=result.rollouts_failed - result.generation_failed,
            generation_failed=result.generation_failed, generated=result.generated, duration_s=time.monotonic() - self.started,
            rollouts_sent=result.verified, passed_through=result.passed_through, batches=batches, finished=True,
        )  # fmt: skip

    def tick(self, force: bool = False) -> None:
        super().tick(force)
        self.pusher.maybe_push(self.counters())

    def shards_wrote(self, rows: int) -> None:
        """A run of several processes: the rows its shards wrote so far (their failures are
        counted at the end), pushed as the rollouts done."""
        self.pusher.maybe_push(CollectCounters(rows, 0, 0, 0, time.monotonic() - self.started))


def push_progress(ns: argparse.Namespace) -> PushingProgress | None:
    """The progress counter to give collect_async with --pushgateway (None without)."""
    if not getattr(ns, "pushgateway", None):
        return None
    from gym_metrics.exporters import Pusher

    instance = ns.output.name.removesuffix(".jsonl")
    return PushingProgress(estimate_total(ns.input, ns.num_repeats, ns.limit, ns.max_rollouts), Pusher(ns.pushgateway, instance, ns.push_interval or PUSH_INTERVAL_S))


def push_after(progress: PushingProgress | None, result: Any, code: int) -> int:
    """The final push; exit 1 when it fails and the command had no error of its own."""
    if progress is None:
        return code
    from gym_metrics.exporters import PushgatewayError

    progress.pusher.wait()
    if progress.pusher.periodic_error:
        print(f"warning: a periodic {progress.pusher.periodic_error}", file=sys.stderr)
    try:
        progress.pusher.push(progress.counters(result))
    except PushgatewayError as exc:
        print(f"error: {exc}; the metrics file is kept: {result.metrics_path}", file=sys.stderr)
        return code or ExitCode.FAILED
    print("pushed   -> pushgateway (job gym_metrics_collect)")
    return code
