"""`collect --pushgateway URL`: the collector's counters pushed to a Prometheus Pushgateway
while it runs and at the end (gym_metrics.exporters.Pusher), fed by the collection's progress
counter. Imported when collect runs (it loads the collector); the flag is in `_export`."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from gym_metrics.errors import ExitCode
from gym_metrics.collector import Progress, estimate_total


class PushingProgress(Progress):
    """The collector's progress counter, pushing a snapshot every `pusher.interval` seconds."""

    def __init__(self, total: int | None, pusher: Any) -> None:
        super().__init__(total)
        self.pusher = pusher

    def counters(self, result: Any = None) -> Any:
        from gym_metrics.exporters import CollectCounters

        final: dict[str, Any] = {}
        if result is not None:
            batches = sum(result.batches_by_server.values()) if result.batches_by_server else None
            final = {"rollouts_sent": result.verified, "passed_through": result.passed_through,
                     "batches": batches, "finished": True}  # fmt: skip
        return CollectCounters(
            rollouts_done=self.done, verify_failed=self.errors - self.generation_failed,
            generation_failed=self.generation_failed, generated=self.generated_ok,
            duration_s=time.monotonic() - self.started, **final,
        )  # fmt: skip

    def tick(self, force: bool = False) -> None:
        super().tick(force)
        self.pusher.maybe_push(self.counters())


def push_progress(ns: argparse.Namespace) -> PushingProgress | None:
    """The progress counter to give collect_async with --pushgateway (None without)."""
    if not getattr(ns, "pushgateway", None):
        return None
    from gym_metrics.exporters import Pusher

    instance = ns.output.name.removesuffix(".jsonl")
    return PushingProgress(estimate_total(ns.input, ns.num_repeats, ns.limit, ns.max_rollouts), Pusher(ns.pushgateway, instance, ns.push_interval))


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
