"""A generated rollout's model calls, captured while it is generated and kept on the rollout
for its row (`ng_model_call_capture`); whatever the outcome, a failed generation's calls too.
With token capture, each call's token IDs are checked (recording.token_gaps) and the gaps
counted; with the trajectory, the turns and tool calls the loop traced and the full call
records are kept for `ng_trajectory` and `ng_perf`, made when the verified row is written."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from gym_metrics.collector._input import Rollout
from gym_metrics.recording import CAPTURE_KEY, PERF_KEY, TRAJECTORY_KEY, EpisodeTrace, capture_block, model_call_records, rollout_id_of, rollout_perf, token_gaps, trajectory
from gym_metrics.targets import capturing


@dataclass
class Capture:
    """What to record (CollectOptions.capture_model_calls / capture_payloads / capture_tokens /
    trajectory), and the token gaps found so far."""

    payloads: bool = False
    tokens: bool = False
    trajectory: bool = False
    token_gaps: int = 0

    def trace(self) -> EpisodeTrace | None:
        """A trace for one rollout's trajectory, when it is recorded."""
        return EpisodeTrace() if self.trajectory else None


@contextmanager
def captured(rollout: Rollout, capture: Capture | None, trace: EpisodeTrace | None = None, into: list[dict[str, Any]] | None = None) -> Iterator[None]:
    """Record the policy calls made in this context on `rollout` (nothing when `capture` is None);
    `into` receives their records, payloads in."""
    if capture is None:
        yield
        return
    with capturing() as calls:
        try:
            yield
        finally:
            records = model_call_records(calls.exchanges)
            if into is not None:
                into.extend(records)
            gaps = token_gaps(calls.exchanges) if capture.tokens else []
            capture.token_gaps += len(gaps)
            block = capture_block(rollout_id_of(rollout.row), records, include_payloads=capture.payloads, gaps=gaps)
            rollout.recorded = {**(rollout.recorded or {}), CAPTURE_KEY: block}
            rollout.trace = (trace, records) if trace is not None else None


def with_trajectory(row: dict[str, Any], rollout: Rollout) -> None:
    """Add `ng_trajectory` to the written row of a traced rollout (its `resolved` read there),
    then its `ng_perf` (its wall time from the episode's start to now, when its row is written
    as NeMo Gym's collection times the agent's `/run`)."""
    if rollout.trace is not None:
        trace, records = rollout.trace
        row[TRAJECTORY_KEY] = trajectory(trace, records, row, rollout_id_of(row))
        perf = rollout_perf(row[TRAJECTORY_KEY], (time.time() - trace.started_at) * 1000)
        if perf is not None:
            row[PERF_KEY] = perf
        rollout.trace = None
