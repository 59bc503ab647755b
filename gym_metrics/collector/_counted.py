"""Failed rollouts counted as zeros in the metrics, as NeMo Gym's `count_failure_classes_as_zero`
counts them: of the failures sidecar, each rollout's last attempt whose class was asked for and
that no row of the output scored, its diagnostics left out (`_ng_failure_*`, `failure_kind`,
`failure_reason`: numbers the aggregation would average), `mask_sample` false, its reward 0 unless
it carries one. Only the metrics change; the output and the sidecar stay as written."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from gym_metrics.rollouts import ROLLOUT_KEY, TASK_KEY, RolloutColumns, concat, read_rollouts


def counted_failures(
    sidecar: Path, classes: Collection[str], scored: Callable[[list[tuple[Any, Any]]], Collection[tuple[Any, Any]]],
) -> list[dict[str, Any]]:
    """The metric-input rows of the sidecar's failures counted as zeros (module docstring);
    `scored`: which of the given (task, rollout) keys the output holds."""
    if not classes or not sidecar.is_file():
        return []
    latest: dict[tuple[Any, Any], dict[str, Any]] = {}
    with sidecar.open("rb") as f:
        for line in f:
            if line.strip():
                row = orjson.loads(line)
                latest[(row.get(TASK_KEY), row.get(ROLLOUT_KEY))] = row  # the last attempt stands
    wanted = {key: row for key, row in latest.items() if row.get("_ng_failure_class") in classes}
    done = set(scored(list(wanted))) if wanted else set()
    counted = []
    for key, row in wanted.items():
        if key in done:
            continue
        kept = {k: v for k, v in row.items() if not k.startswith("_ng_failure_") and k not in ("failure_kind", "failure_reason")}
        kept["mask_sample"] = False
        kept.setdefault("reward", 0.0)
        counted.append(kept)
    return counted


def _held(columns: Iterable[RolloutColumns], keys: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Those of `keys` (the sidecar's few) that some row of `columns` holds: the rows of their
    tasks picked column-wise first (an output of millions of rows is never walked row by row)."""
    tasks = np.array(sorted({t for t, _ in keys if isinstance(t, int)}), dtype=np.int64)
    present: set[tuple[int, int]] = set()
    for cols in columns:
        mine = np.isin(cols.task_index, tasks)
        present.update(zip(cols.task_index[mine].tolist(), cols.rollout_index[mine].tolist()))
    return [key for key in keys if key in present]


def with_counted_failures(
    by_agent: Mapping[str, RolloutColumns], output_path: Path, sidecar: Path, classes: Collection[str], default_agent: str | None,
) -> tuple[dict[str, RolloutColumns], int]:
    """Each agent's columns with its counted failures added, and how many were."""
    rows = counted_failures(sidecar, classes, lambda keys: _held(by_agent.values(), keys))
    if not rows:
        return dict(by_agent), 0
    fd, name = tempfile.mkstemp(prefix=output_path.name + ".counted.", dir=output_path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(b"".join(orjson.dumps(row) + b"\n" for row in rows))
        extra = read_rollouts(Path(name), on_bad_line="fail", default_agent=default_agent).agents
    finally:
        os.unlink(name)
    merged = dict(by_agent)
    for agent, cols in extra.items():
        merged[agent] = concat([merged[agent], cols]) if agent in merged else cols
    return merged, len(rows)

