"""A generated rollout's model calls, captured while it is generated and kept on the rollout
for its row (`ng_model_call_capture`); whatever the outcome, a failed generation's calls too.
With token capture, each call's token IDs are checked (recording.token_gaps) and the gaps
counted."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from gym_metrics.collector._input import Rollout
from gym_metrics.recording import CAPTURE_KEY, capture_block, rollout_id_of, token_gaps
from gym_metrics.targets import capturing


@dataclass
class Capture:
    """What to record (CollectOptions.capture_model_calls / capture_payloads / capture_tokens),
    and the token gaps found so far."""

    payloads: bool = False
    tokens: bool = False
    token_gaps: int = 0


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
            gaps = token_gaps(calls.exchanges) if capture.tokens else []
            capture.token_gaps += len(gaps)
            block = capture_block(rollout_id_of(rollout.row), calls.exchanges, include_payloads=capture.payloads, gaps=gaps)
            rollout.recorded = {**(rollout.recorded or {}), CAPTURE_KEY: block}
