"""Failed rollouts counted as zeros in the metrics, as NeMo Gym's `count_failure_classes_as_zero`
counts them: of the failures sidecar, each rollout's last attempt whose class was asked for and
that no row of the output scored, its diagnostics left out (`_ng_failure_*`, `failure_kind`,
`failure_reason`: numbers the aggregation would average), `mask_sample` false, its reward 0 unless
it carries one. Only the metrics change; the output and the sidecar stay as written."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.rollouts import ROLLOUT_KEY, TASK_KEY, RolloutColumns, RolloutFile, concat, read_rollouts
from gym_metrics._util.jsonio import dumps_finite


def counted_failures(
    sidecar: Path, classes: Collection[str], scored: Callable[[list[tuple[Any, Any]]], Collection[tuple[Any, Any]]],
    seen: set[str] | None = None,
) -> list[dict[str, Any]]:
    """The metric-input rows of the sidecar's failures counted as zeros (module docstring);
    `scored`: which of the given (task, rollout) keys the output holds; `seen` gets the classes
    the sidecar's rollouts hold (for `unmatched_classes`)."""
    if not classes:
        return []
    latest = _latest(sidecar)
    _note_classes(latest.values(), seen)
    wanted = {key: row for key, row in latest.items() if row.get("_ng_failure_class") in classes}
    done = set(scored(list(wanted))) if wanted else set()
    return [_as_zero(row) for key, row in wanted.items() if key not in done]


def counted_in_shards(
    shards: Sequence[tuple[Mapping[str, RolloutColumns], Path]], classes: Collection[str], default_agent: str | None = None,
    seen: set[str] | None = None,
) -> list[dict[str, Any]]:
    """`gym eval aggregate`'s rule over several outputs (each its columns by agent and its
    failures sidecar): each sidecar's failures its own output did not score (by task and rollout
    alone), the last attempt of a rollout (agent, task, rollout) standing across outputs, counted
    when its class was asked for and no output scored it; a row naming no agent is left out.
    (NeMo Gym keys a rollout by its server's stamp, else its agent: the same here, where one
    agent's rows carry one stamp, and aggregation refuses one agent's key in two outputs anyway.)
    `seen` gets the classes the sidecars' rollouts hold (for `unmatched_classes`)."""
    if not classes:
        return []
    latest: dict[tuple[str, Any, Any], dict[str, Any]] = {}
    for by_agent, sidecar in shards:
        rows = _latest(sidecar)
        _note_classes(rows.values(), seen)
        held = set(_held(by_agent.values(), list(rows)))
        for key, row in rows.items():
            agent = _agent_of(row, default_agent)
            if key not in held and agent is not None:
                latest[(agent, key[0], key[1])] = row
    wanted = {identity: row for identity, row in latest.items() if row.get("_ng_failure_class") in classes}
    scored: set[tuple[str, Any, Any]] = set()
    for agent in {a for a, _, _ in wanted}:
        columns = [by_agent[agent] for by_agent, _ in shards if agent in by_agent]
        scored.update((agent, t, r) for t, r in _held(columns, [(t, r) for a, t, r in wanted if a == agent]))
    return [_as_zero(row) for identity, row in wanted.items() if identity not in scored]


def unmatched_classes(classes: Sequence[str], seen: Collection[str], who: str) -> list[str]:
    """One line per asked class no rollout of the sidecar(s) holds (a typo counts nothing,
    silently: NeMo Gym takes any string), naming those they do hold; none when they hold no
    failure at all (nothing to match: not a sign of a typo)."""
    if not seen:
        return []
    held = ", ".join(sorted(seen))
    return [f"{who}: no failed rollout of class {c!r} (the failures hold: {held})" for c in dict.fromkeys(classes) if c not in seen]


def _note_classes(rows: Iterable[Mapping[str, Any]], seen: set[str] | None) -> None:
    if seen is not None:
        seen.update(str(c) for row in rows if (c := row.get("_ng_failure_class")) is not None)


def _latest(sidecar: Path) -> dict[tuple[Any, Any], dict[str, Any]]:
    """Each rollout's last attempt in a failures sidecar, by (task, rollout)."""
    latest: dict[tuple[Any, Any], dict[str, Any]] = {}
    if sidecar.is_file():
        with sidecar.open("rb") as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    try:
                        row = orjson.loads(line)
                    except orjson.JSONDecodeError as exc:
                        raise InvalidInputError(f"{sidecar}: not JSON", [FieldViolation(f"line {number}", str(exc))]) from None
                    latest[(row.get(TASK_KEY), row.get(ROLLOUT_KEY))] = row  # the last attempt stands
    return latest


def _as_zero(row: dict[str, Any]) -> dict[str, Any]:
    """A failure's metric-input copy: its diagnostics left out, unmasked, 0 unless it has a reward."""
    kept = {k: v for k, v in row.items() if not k.startswith("_ng_failure_") and k not in ("failure_kind", "failure_reason")}
    kept["mask_sample"] = False
    kept.setdefault("reward", 0.0)
    return kept


def _agent_of(row: Mapping[str, Any], default_agent: str | None) -> str | None:
    ref = row.get("agent_ref")
    name = ref.get("name") if isinstance(ref, Mapping) else None
    return name if isinstance(name, str) and name else default_agent


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
    seen: set[str] | None = None,
) -> tuple[dict[str, RolloutColumns], int]:
    """Each agent's columns with its counted failures added, and how many were; `seen` as
    counted_failures'."""
    rows = counted_failures(sidecar, classes, lambda keys: _held(by_agent.values(), keys), seen)
    if not rows:
        return dict(by_agent), 0
    extra = rows_read(rows, output_path.parent, output_path.name + ".counted.", default_agent).agents
    merged = dict(by_agent)
    for agent, cols in extra.items():
        merged[agent] = concat([merged[agent], cols]) if agent in merged else cols
    return merged, len(rows)


def rows_read(rows: list[dict[str, Any]], folder: Path | None, prefix: str, default_agent: str | None, keep_rows: bool = True) -> RolloutFile:
    """Metric-input rows as the reader makes them of a file (their columns, the same engine code),
    through a scratch file in `folder` (None: the temp directory), removed once read."""
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=".jsonl", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(b"".join(dumps_finite(row) + b"\n" for row in rows))
        return read_rollouts(Path(name), on_bad_line="fail", default_agent=default_agent, keep_rows=keep_rows)
    finally:
        os.unlink(name)
