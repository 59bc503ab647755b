"""What a run cost: tokens, wall time and money per rollout, and per passing task.

Numbers come from the numeric columns the reader already extracted
(docs/metrics.md#numeric-fields): the
`response.usage` keys appear unprefixed (`input_tokens`, `output_tokens`, `total_tokens`), wall
time and cost are top-level fields when the producer recorded them.

Every rollout is counted, masked and failed ones included: masking keeps a rollout out of the
quality statistics, but its tokens were still paid for. A rollout without a field (absent, None
or non-finite) is counted in `<field>/missing_rollouts` and left out of that field's stats and
total; it is never taken as zero, so a total is "over the rollouts that reported it".

Keys (all prefixed `economics/`):

- `rollouts`, `tasks`: rollouts and distinct tasks counted.
- `passing_tasks`: tasks with at least one unmasked, verified rollout whose `reward` passes
  (>= PASS_THRESHOLD, 1.0: the reducers' definition).
- per field `<f>`: `<f>/rollouts` and `<f>/missing_rollouts` (always, for the token fields and
  for any wall-time or cost field some rollout has), and, when at least one rollout has it,
  `<f>/mean`, `<f>/p50`, `<f>/p90` (per rollout; numpy's linear interpolation) and `<f>/total`.
- `cost_per_passing_task`: total cost / passing tasks, from the first of COST_FIELDS present.
- `tokens_per_passing_task`: total tokens / passing tasks (`total_tokens`; where a rollout lacks
  it, `input_tokens + output_tokens` when it has both).
  Both are omitted when no task passes or nothing was recorded; never null.
"""

from __future__ import annotations

import numpy as np

from gym_metrics._util.unique import count_distinct
from gym_metrics.rollouts import NumericField, RolloutColumns, ValueKind
from gym_metrics.reducers._rewards import passes

PREFIX = "economics/"
TOKEN_FIELDS = ("input_tokens", "output_tokens", "total_tokens")
"""Always reported (with missing counts), since every LLM rollout should have them."""
WALL_TIME_FIELDS = ("latency_s", "wall_time_s", "duration_s", "elapsed_s")
"""Reported when some rollout has them."""
COST_FIELDS = ("cost_usd", "cost")
"""Reported when some rollout has them; the first present one gives cost_per_passing_task."""
REWARD_FIELD = "reward"


def economics(cols: RolloutColumns, reward_field: str = REWARD_FIELD) -> dict[str, float | int]:
    """Per-rollout usage summary and cost per passing task of one agent (keys: module doc)."""
    out: dict[str, float | int] = {
        f"{PREFIX}rollouts": len(cols),
        f"{PREFIX}tasks": count_distinct(cols.task_index),
    }
    passing = passing_tasks(cols, reward_field)
    out[f"{PREFIX}passing_tasks"] = passing
    for name in (*TOKEN_FIELDS, *WALL_TIME_FIELDS, *COST_FIELDS):
        col = cols.fields.get(name)
        if col is None and name not in TOKEN_FIELDS:
            continue
        out.update(field_summary(name, col, len(cols)))
    if passing:
        cost = next((cols.fields[c] for c in COST_FIELDS if c in cols.fields), None)
        if cost is not None and _valid(cost).any():
            out[f"{PREFIX}cost_per_passing_task"] = float(cost.values[_valid(cost)].sum()) / passing
        tokens = _token_totals(cols)
        if tokens is not None:
            out[f"{PREFIX}tokens_per_passing_task"] = float(tokens.sum()) / passing
    return out


def field_summary(name: str, col: NumericField | None, n: int) -> dict[str, float | int]:
    """Counts, mean / p50 / p90 and total of one field over the rollouts that have it."""
    valid = _valid(col) if col is not None else np.zeros(n, dtype=bool)
    have = int(valid.sum())
    key = f"{PREFIX}{name}/"
    out: dict[str, float | int] = {f"{key}rollouts": have, f"{key}missing_rollouts": n - have}
    if have and col is not None:
        values = col.values[valid]
        p50, p90 = np.percentile(values, [50.0, 90.0])
        total = values.sum()
        out[f"{key}mean"] = float(values.mean())
        out[f"{key}p50"] = float(p50)
        out[f"{key}p90"] = float(p90)
        out[f"{key}total"] = float(total) if col.kind is ValueKind.FLOAT else int(total)
    return out


def passing_tasks(cols: RolloutColumns, reward_field: str = REWARD_FIELD) -> int:
    """Tasks with at least one measured reward that passes (masked and failed rows skipped)."""
    reward = cols.fields.get(reward_field)
    if reward is None:
        return 0
    ok = _valid(reward) & ~cols.masked & passes(reward.values)
    if cols.errors is not None:
        ok &= cols.errors == 0
    return count_distinct(cols.task_index[ok])


def _token_totals(cols: RolloutColumns) -> np.ndarray | None:
    """Tokens of each rollout that reported them; None when none did."""
    total = cols.fields.get("total_tokens")
    have = _valid(total) if total is not None else np.zeros(len(cols), dtype=bool)
    values = np.where(have, total.values if total is not None else 0.0, 0.0)
    inp, outp = cols.fields.get("input_tokens"), cols.fields.get("output_tokens")
    if inp is not None and outp is not None:
        both = ~have & _valid(inp) & _valid(outp)
        values = np.where(both, inp.values + outp.values, values)
        have |= both
    return values[have] if have.any() else None


def _valid(col: NumericField) -> np.ndarray:
    return col.present & np.isfinite(col.values)


__all__ = ["COST_FIELDS", "TOKEN_FIELDS", "WALL_TIME_FIELDS", "economics", "field_summary", "passing_tasks"]
