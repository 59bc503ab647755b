"""A generated rollout's model calls, captured while it is generated and kept on the rollout
for its row (`ng_model_call_capture`); whatever the outcome, a failed generation's calls too."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from gym_metrics.collector._input import Rollout
from gym_metrics.recording import CAPTURE_KEY, capture_block, rollout_id_of
from gym_metrics.targets import capturing


@dataclass(frozen=True)
class Capture:
    """What to record (CollectOptions.capture_model_calls / capture_payloads)."""

    payloads: bool = False


@contextmanager
def captured(rollout: Rollout, capture: Capture | None) -> Iterator[None]:
    """Record the policy calls made in this context on `rollout` (nothing when `capture` is None)."""
    if capture is None:
        yield
        return
    with capturing() as calls:
        try:
            yield
        finally:
            block = capture_block(rollout_id_of(rollout.row), calls.exchanges, include_payloads=capture.payloads)
            rollout.recorded = {**(rollout.recorded or {}), CAPTURE_KEY: block}
