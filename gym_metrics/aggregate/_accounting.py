"""Row accounting: which rollouts failed, which were masked, which hold non-numeric values.

Counts and coverage come out as agent metrics; failed rollouts leave the stats (or count as
reward 0.0) before anything is computed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gym_metrics._util.unique import unique, unique_counts
from gym_metrics.rollouts import (
    ERROR_KINDS,
    NumericField,
    RolloutColumns,
    ShownField,
)


def non_numeric_counts_of(data: RolloutColumns, measured_pos: np.ndarray) -> dict[str, int]:
    """Per field that is numeric in at least one of the agent's rows (so a purely textual field
    such as `extracted_answer` is never reported): the measured rows holding it as text, an
    object or a list. Empty when the rows' producer recorded no such values (packed columns)."""
    if not data.non_numeric:
        return {}
    counts = {}
    for k in sorted(data.non_numeric):
        numeric = data.fields.get(k)
        if numeric is not None and numeric.present.any():
            n = int(data.non_numeric[k][measured_pos].sum())
            if n:
                counts[k] = n
    return counts


def error_counts(data: RolloutColumns) -> dict[str, int]:
    """`errors/total` and `errors/<kind>`, only when some rollout failed verification."""
    if data.errors is None or not data.errors.any():
        return {}
    codes = np.bincount(data.errors, minlength=len(ERROR_KINDS) + 1)
    out = {"errors/total": int(codes[1:].sum())}
    out.update({f"errors/{kind}": int(codes[i + 1]) for i, kind in enumerate(ERROR_KINDS) if codes[i + 1]})
    return out


def counted_errors_as_zero(groups: Any, masked: np.ndarray, failed: np.ndarray) -> bool:
    """Whether a metrics file's agent was aggregated with `--count-errors-as-zero`, from its
    `group_level_metrics` and its rows' masks and failures (the file does not record it): its
    tasks' `num_rollouts` count every unmasked row (a null reward included) and, with the
    option, every failed row (failed rows are unmasked then), without it none. False when the
    rows have no failure or the counts fit the option's absence (or neither: a stale file)."""
    if not failed.any() or not isinstance(groups, list):
        return False
    counted = sum(n for n in (g.get("num_rollouts") for g in groups if isinstance(g, dict)) if type(n) is int)
    return counted == int((~masked | failed).sum())


def apply_errors(data: RolloutColumns, as_zero: bool) -> RolloutColumns:
    """Failed rollouts either leave the stats (as masked rows do, without counting as masked)
    or count with reward 0.0."""
    if data.errors is None or not data.errors.any():
        return data
    failed = data.errors != 0
    if not as_zero:
        kept = data.take(np.flatnonzero(~failed))
        kept.errors = None  # what is left did not fail
        return kept
    reward = data.fields.get("reward", NumericField(np.full(len(data), np.nan), np.zeros(len(data), bool)))
    reward = NumericField(np.where(failed, 0.0, reward.values), reward.present | failed, reward.kind)
    fields = {**data.fields, "reward": reward}
    other = dict(data.non_numeric or {})
    if "reward" in other:  # a failed rollout's reward is the 0.0 set here
        other["reward"] = other["reward"] & ~failed
    shown = dict(data.shown or {})
    if "reward" in shown:  # and rollout_infos show that 0.0
        s = shown["reward"]
        text = s.text.copy() if s.text is not None else None
        if text is not None:
            text[failed] = None
        shown["reward"] = ShownField(np.where(failed, 0.0, s.values), s.present | failed, s.ints & ~failed, text)
    return RolloutColumns(
        data.task_index,
        data.rollout_index,
        fields,
        data.masked & ~failed,
        data.rows,
        data.row_labels,
        data.label_name,
        non_numeric=other or None,
        shown=shown or None,
    )


def coverage_counts(data: RolloutColumns, measured_pos: np.ndarray) -> dict[str, int]:
    """docs/metrics.md#masking: only when something was masked."""
    masked = len(data) - len(measured_pos)
    if masked == 0:
        return {}
    measured_tasks = unique(data.task_index[measured_pos])
    all_tasks = unique(data.task_index)
    return {
        "coverage/measured_rollouts": len(measured_pos),
        "coverage/masked_rollouts": masked,
        "coverage/measured_tasks": len(measured_tasks),
        "coverage/fully_masked_tasks": len(all_tasks) - len(measured_tasks),
    }


def failed_by_task(data: RolloutColumns) -> dict[int, int]:
    if data.errors is None or not data.errors.any():
        return {}
    t, c = unique_counts(data.task_index[data.errors != 0])
    return dict(zip(t.tolist(), c.tolist()))


def masked_by_task(data: RolloutColumns, tasks: np.ndarray) -> dict[int, int]:
    if not data.masked.any():
        return {}
    t, c = unique_counts(data.task_index[data.masked])
    return dict(zip(t.tolist(), c.tolist()))


__all__ = ["apply_errors", "coverage_counts", "error_counts", "failed_by_task", "masked_by_task", "non_numeric_counts_of"]
