"""Intervals of a value bounded in [0, 1], cut at the bounds where the report draws and prints them.

A Student-t interval is symmetric around the mean, so for a reward near 1 its high end can
pass 1 (`cluster_ci_high_95/reward` 1.093) although no mean of such rewards can. The report
cuts such an end at the bound (the interval still holds the true mean at least as often: the
part cut off holds no possible value) and says so; the metrics file keeps the Student-t ends
(docs/statistics.md#bounded-intervals). A field counts as bounded when it is 0/1 (aggregate
wrote its Wilson interval) or when it is reward-like (the report's value field, or a name with
"reward" in it) and its agent-wide min and max lie in [0, 1].
"""

from __future__ import annotations

import math
import re
from typing import Any

from gym_metrics.report._bounds import finite
from gym_metrics.report._data import AgentData

LOW, HIGH = 0.0, 1.0
INTERVAL_KEY = re.compile(r"^(?:cluster_ci_(low|high)_95/(.+)|ci_(low|high)_95_across_repeats/mean/(.+))$")
"""agent_metrics keys holding an interval end of a field's mean: (side, field) in groups 1-2 or 3-4."""


def unit_bounded(agent: AgentData, name: str, value_field: str) -> bool:
    """Every value of `name` lies in [0, 1] and it is a 0/1 field or reward-like."""
    metrics = agent.agent_metrics
    if f"wilson_ci_low_95/{name}" in metrics:  # aggregate found every value 0 or 1
        return True
    if name != value_field and "reward" not in name.lower():
        return False
    low, high = metrics.get(f"min/{name}"), metrics.get(f"max/{name}")
    return finite(low) and finite(high) and LOW <= low and high <= HIGH


def cut(low: float, high: float, bounded: bool) -> tuple[float, float]:
    """(low, high) cut to [0, 1] when `bounded` (NaN stays NaN)."""
    if not bounded:
        return low, high
    return (max(low, LOW) if math.isfinite(low) else low), (min(high, HIGH) if math.isfinite(high) else high)


def interval(agent: AgentData, name: str, value_field: str, prefix: str = "cluster_ci") -> tuple[float, float, bool]:
    """The agent's `<prefix>_{low,high}_95/<name>` (NaN where absent), cut where bounded, and
    whether a cut happened."""
    raw = [agent.agent_metrics.get(f"{prefix}_{side}_95/{name}", math.nan) for side in ("low", "high")]
    low, high = (float(v) if finite(v) else math.nan for v in raw)
    bounded = unit_bounded(agent, name, value_field)
    was_cut = bounded and (low < LOW or high > HIGH)  # NaN compares False
    return *cut(low, high, bounded), was_cut


def shown_value(agent: AgentData, key: str, value: Any, value_field: str) -> tuple[Any, bool]:
    """A key metric's value as the report prints it: an interval end of a bounded field cut at
    the bound; and whether it was cut."""
    match = INTERVAL_KEY.match(key)
    if match is None or not finite(value):
        return value, False
    side, name = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
    if not unit_bounded(agent, name, value_field):
        return value, False
    bounded = max(float(value), LOW) if side == "low" else min(float(value), HIGH)
    return bounded, bounded != value
