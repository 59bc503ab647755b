"""What comparisons read: agents from one rollouts file or two (one agent each, tasks matched
by `_ng_task_index`), and one agent's measured values grouped by task."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gym_metrics.rollouts import TASK_KEY, OnBadLine, RolloutColumns, read_rollouts
from gym_metrics.errors import InvalidInputError
from gym_metrics.reducers import TaskRewards


def load_agents(
    paths: Sequence[Path], names: Sequence[str] | None, *, common_tasks: bool = False, on_bad_line: OnBadLine = "fail",
    skipped: Callable[[Path, Sequence[Any]], None] | None = None,
) -> tuple[dict[str, RolloutColumns], list[str]]:
    """(columns by agent, the agents to compare in order). One file: every agent in it, `names`
    required. Two files: one agent each, named by `names` if given (else their own names, or the
    file names when those clash); their task sets must match unless `common_tasks`. `skipped`
    hears of each file's lines `on_bad_line="skip"` left out."""
    if len(paths) == 1:
        read = read_rollouts(paths[0], on_bad_line=on_bad_line)
        if not names:
            held = sorted(read.agents)
            if len(held) < 2:
                raise InvalidInputError(f"{paths[0]} holds {len(held)} agent{'' if len(held) == 1 else 's'} ({', '.join(held) or 'none'}): "
                                        "compare needs two (give a second rollouts file)")  # fmt: skip
            raise InvalidInputError(f"{paths[0]}: name the agents to compare with --agents A B [...] (it holds {', '.join(held)})")
        if skipped is not None and read.bad_lines:
            skipped(paths[0], read.bad_lines)
        return dict(read.agents), list(names)
    if len(paths) != 2:
        raise InvalidInputError(f"compare takes one rollouts file, or two with one agent each; got {len(paths)} files")
    if names and len(names) != 2:
        raise InvalidInputError(f"with two rollout files --agents names their two agents; got {len(names)} names")
    cols = [_single_agent(p, on_bad_line, skipped) for p in paths]
    labels = list(names) if names else [name for name, _ in cols]
    if labels[0] == labels[1]:
        labels = [str(p) for p in paths]
    if not common_tasks:
        _same_tasks(paths, cols[0][1], cols[1][1])
    return {labels[0]: cols[0][1], labels[1]: cols[1][1]}, labels


def _single_agent(path: Path, on_bad_line: OnBadLine, skipped: Callable[[Path, Sequence[Any]], None] | None) -> tuple[str, RolloutColumns]:
    read = read_rollouts(path, on_bad_line=on_bad_line)
    if skipped is not None and read.bad_lines:
        skipped(path, read.bad_lines)
    agents = read.agents
    if len(agents) != 1:
        listed = ", ".join(sorted(agents)) or "none"
        raise InvalidInputError(f"{path}: holds {len(agents)} agents ({listed}); with two files each must hold one agent")
    return next(iter(agents.items()))


def _same_tasks(paths: Sequence[Path], a: RolloutColumns, b: RolloutColumns) -> None:
    """Refuse two files whose task sets differ: a comparison of different task sets is not
    paired, and silently dropping tasks hides that the runs differ."""
    ta, tb = np.unique(a.task_index), np.unique(b.task_index)
    only_a, only_b = np.setdiff1d(ta, tb, assume_unique=True), np.setdiff1d(tb, ta, assume_unique=True)
    if not (len(only_a) or len(only_b)):
        return
    shown = ", ".join(map(str, np.concatenate([only_a, only_b])[:5].tolist()))
    common = len(ta) - len(only_a)
    raise InvalidInputError(
        f"{paths[0]} and {paths[1]} hold different tasks ({TASK_KEY}): {len(only_a)} only in {paths[0]}, "
        f"{len(only_b)} only in {paths[1]} (e.g. {shown}); --common-tasks compares the {common} both hold"
    )


def task_rewards(cols: RolloutColumns, field: str = "reward") -> tuple[np.ndarray, TaskRewards]:
    """Measured rewards of one agent grouped by task, in rollout order (masked, failed and
    absent rows skipped): (the tasks' indices, ascending; their rewards, one task each)."""
    col = cols.fields.get(field)
    if col is None:
        return np.zeros(0, np.int64), TaskRewards(np.zeros(0), np.zeros(1, np.int64))
    order, dup = cols.key_order()
    if order is None:
        order = np.arange(len(cols))
    elif len(dup):
        raise cols.duplicate_keys_error(order, dup)
    keep = (col.present & np.isfinite(col.values) & ~cols.masked)[order]
    if cols.errors is not None:
        keep &= cols.errors[order] == 0
    t, v = cols.task_index[order][keep], col.values[order][keep]
    first = np.flatnonzero(np.concatenate(([True], t[1:] != t[:-1]))) if len(t) else np.zeros(0, np.int64)
    return t[first], TaskRewards(v, np.append(first, len(t)))
