"""`perf_summary`: an agent's rollouts' `ng_perf` blocks (turns, tool calls, tokens, wall time:
what `collect --trajectory` writes, and NeMo Gym's collection with observability on) summarized
as NeMo Gym 0.7.0's aggregation summarizes them (`nemo_gym/reward_profile.py`, the perf
summary), for the agent's entry in the metrics file. No rollout with one: no summary.

- `overall_observability_coverage`: rollouts with an `ng_perf` over all the agent's rollouts;
  `token_observability_coverage`: those whose own coverage is above 0, over all.
- Per token field (`prompt_tokens`, `cached_prompt_tokens`, `completion_tokens`,
  `reasoning_tokens`) some rollout reports: its mean, median and total; `num_turns`: mean,
  median, population std, min, p90, max; completion tokens per turn: mean and median;
  `total_latency_ms`: p50, p90, p99 (linear between ranks) and mean. A value counts when it is
  a JSON number (true and false count as 1 and 0, as there); NaN and infinities do not (they
  reach NeMo Gym's route as null).

The blocks come from the rows (`gym_metrics.rollouts.perf_blocks`: read from the file only when a
row holds one).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

import numpy as np

SECTION = "perf_summary"
TOKEN_FIELDS = ("prompt_tokens", "cached_prompt_tokens", "completion_tokens", "reasoning_tokens")
_KEYS = (*TOKEN_FIELDS, "num_turns", "token_observability_coverage", "total_latency_ms")


def perf_summary(records: Sequence[Mapping[str, Any]], total: int) -> dict[str, Any] | None:
    """The summary of `records` (the `ng_perf` blocks of an agent's rollouts) out of `total`
    rollouts; None without a record (or a rollout)."""
    if total <= 0 or not records:
        return None
    values: dict[str, list[Any]] = {key: [] for key in _KEYS}
    per_turn: list[float] = []
    for record in records:  # one pass: a million blocks are read in well under a second
        for key, value in record.items():
            held = values.get(key)
            if held is not None and _counts(value):
                held.append(value)
        turns, tokens = record.get("num_turns"), record.get("completion_tokens")
        if _counts(turns) and _counts(tokens) and turns > 0:
            per_turn.append(tokens / turns)
    covered = sum(1 for c in values["token_observability_coverage"] if c > 0)
    out: dict[str, Any] = {"overall_observability_coverage": len(records) / total, "token_observability_coverage": covered / total}
    for field in TOKEN_FIELDS:
        if given := values[field]:
            out.update({f"mean_{field}": statistics.fmean(given), f"median_{field}": statistics.median(given), f"total_{field}": _total(given)})
    if turns := values["num_turns"]:
        out.update({"mean_num_turns": statistics.fmean(turns), "median_num_turns": statistics.median(turns),
                    "std_num_turns": statistics.pstdev(turns), "min_num_turns": min(turns),
                    "p90_num_turns": _quantile(turns, 90), "max_num_turns": max(turns)})  # fmt: skip
    if per_turn:
        out.update({"mean_tokens_per_turn": statistics.fmean(per_turn), "median_tokens_per_turn": statistics.median(per_turn)})
    if latency := values["total_latency_ms"]:
        out.update({f"total_latency_p{q}_ms": _quantile(latency, q) for q in (50, 90, 99)})
        out["total_latency_mean_ms"] = statistics.fmean(latency)
    return out


def _counts(value: Any) -> TypeGuard[float]:
    """A JSON number as NeMo Gym's route receives it: NaN and infinities reach it as null (its
    client sends the rows through orjson), so they count as absent here, as there."""
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _total(values: list[Any]) -> Any:
    """Integers add exactly (an int, as there); floats correctly rounded (what the compensated
    sum of NeMo Gym's Python 3.13 gives)."""
    return sum(values) if all(isinstance(v, int) for v in values) else math.fsum(values)


def _quantile(values: list[Any], percent: int) -> float:
    """pandas' `Series.quantile(percent / 100)`: linear between ranks (numpy's percentile of
    the fraction times 100, as pandas asks it)."""
    return float(np.percentile(np.asarray(values, dtype=np.float64), (percent / 100) * 100.0))


def perf_sections(records: Mapping[str, Sequence[Mapping[str, Any]]], totals: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    """`{agent: {"perf_summary": ...}}` for each agent of `totals` (its rollouts) with blocks
    in `records` (perf_records)."""
    out = {}
    for agent, total in totals.items():
        summary = perf_summary(records.get(agent, []), total)
        if summary is not None:
            out[agent] = {SECTION: summary}
    return out


__all__ = ["SECTION", "perf_sections", "perf_summary"]
