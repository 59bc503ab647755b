"""Write `<stem>_aggregate_metrics.json` (SPEC A11), streaming group by group.

Groups are serialised in chunks so a million rollout_infos never exist as dicts at once.
Agents are written sorted by name and every key order is fixed: the file is deterministic
byte for byte. Non-finite numbers are written as null (JSON has no NaN).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from gym_metrics.aggregate._columns import ROLLOUT_KEY, TASK_KEY, ValueKind
from gym_metrics.aggregate._engine import AgentAggregate, GroupTable

_CHUNK = 4096
_OPTS = orjson.OPT_SERIALIZE_NUMPY


def output_path_for(rollouts_path: str | Path) -> Path:
    """`<stem>_aggregate_metrics.json` beside `<stem>.jsonl`."""
    p = Path(rollouts_path)
    return p.with_name(f"{p.stem}_aggregate_metrics.json")


def write_aggregate_metrics(path: str | Path, aggregates: Iterable[AgentAggregate]) -> Path:
    """Write the file atomically (temp file + rename): a crash never leaves half a file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as f:
        write_json(f, aggregates)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    return path


def write_json(f: IO[bytes], aggregates: Iterable[AgentAggregate]) -> None:
    f.write(b"[")
    for i, agg in enumerate(sorted(aggregates, key=lambda a: a.agent_name)):
        f.write(b",\n" if i else b"\n")
        _write_agent(f, agg)
    f.write(b"\n]\n")


def _dump(value: Any, indent: bool = False) -> bytes:
    return orjson.dumps(value, option=_OPTS | (orjson.OPT_INDENT_2 if indent else 0))


def _indent(blob: bytes, spaces: int) -> bytes:
    return blob.replace(b"\n", b"\n" + b" " * spaces)


def _write_agent(f: IO[bytes], agg: AgentAggregate) -> None:
    f.write(b'  {\n    "agent_ref": ' + _dump({"name": agg.agent_name}))
    f.write(b',\n    "agent_metrics": ' + _indent(_dump(agg.agent_metrics, indent=True), 4))
    f.write(b',\n    "key_metrics": ' + _indent(_dump(agg.key_metrics, indent=True), 4))
    f.write(b',\n    "group_level_metrics": [')
    first = True
    for blob in iter_group_json(agg.groups):
        f.write(b"\n      " if first else b",\n      ")
        f.write(blob)
        first = False
    f.write(b"\n    ]" if not first else b"]")
    f.write(b',\n    "repeat_level_metrics": [')
    for i, entry in enumerate(agg.repeat_level_metrics):
        f.write((b",\n      " if i else b"\n      ") + _dump(entry))
    f.write(b"\n    ]" if agg.repeat_level_metrics else b"]")
    f.write(b',\n    "non_finite_counts": ' + _dump(agg.non_finite_counts))
    f.write(b"\n  }")


def iter_group_json(groups: GroupTable) -> Iterator[bytes]:
    """One compact JSON object per task, in task order."""
    for entry in iter_group_dicts(groups):
        yield _dump(entry)


def iter_group_dicts(groups: GroupTable) -> Iterator[dict[str, Any]]:
    """group_level_metrics entries (SPEC A4), built a chunk of tasks at a time."""
    stat_keys = list(groups.stats)
    for lo in range(0, len(groups), _CHUNK):
        hi = min(lo + _CHUNK, len(groups))
        tasks = groups.task_index[lo:hi].tolist()
        stats = np.column_stack([groups.stats[k][lo:hi] for k in stat_keys]).tolist() if stat_keys else None
        num = groups.num_rollouts[lo:hi].tolist()
        expected = groups.expected_num_rollouts[lo:hi].tolist()
        infos = _rollout_info_chunks(groups, lo, hi)
        for j, task in enumerate(tasks):
            entry: dict[str, Any] = {TASK_KEY: task}
            if stats is not None:
                for key, value in zip(stat_keys, stats[j]):
                    if not math.isnan(value):
                        entry[key] = value
            entry["sample"] = groups.samples[lo + j]
            entry["num_rollouts"] = num[j]
            entry["expected_num_rollouts"] = expected[j]
            entry["missing_num_rollouts"] = expected[j] - num[j]
            entry["reward_profile_completion_pct"] = 100.0 if expected[j] == 0 else 100.0 * num[j] / expected[j]
            if infos is not None:
                entry["rollout_infos"] = infos[j]
            if groups.custom is not None and groups.custom[lo + j]:
                entry.update(groups.custom[lo + j])  # type: ignore[arg-type]
            yield entry


def _rollout_info_chunks(groups: GroupTable, lo: int, hi: int) -> list[list[dict[str, Any]]] | None:
    """rollout_infos of tasks lo..hi: rollout_id, both indices, every numeric field present."""
    table, bounds = groups.rollout_infos, groups.info_starts
    if table is None or bounds is None:
        return None
    a, b = int(bounds[lo]), int(bounds[hi])
    t = table.task_index[a:b].tolist()
    r = table.rollout_index[a:b].tolist()
    names = list(table.fields)
    columns = []
    complete = True
    for name in names:
        col = table.fields[name]
        values = col.values[a:b]
        present = col.present[a:b]
        if col.kind is ValueKind.FLOAT:
            py = values.tolist()
        else:
            finite = np.isfinite(values)
            as_int = np.where(finite, values, 0).astype(np.int64).tolist()
            py = [x if ok else float(v) for x, ok, v in zip(as_int, finite.tolist(), values.tolist())] if not finite.all() else as_int
        if not present.all():
            complete = False
            py = [v if p else _ABSENT for v, p in zip(py, present.tolist())]
        columns.append(py)
    keys = ["rollout_id", TASK_KEY, ROLLOUT_KEY, *names]
    ids = [f"{x}:{y}" for x, y in zip(t, r)]
    if complete:
        infos = [dict(zip(keys, vals)) for vals in zip(ids, t, r, *columns)]
    else:
        infos = [{k: v for k, v in zip(keys, vals) if v is not _ABSENT} for vals in zip(ids, t, r, *columns)]
    out = []
    for g in range(lo, hi):
        out.append(infos[int(bounds[g]) - a : int(bounds[g + 1]) - a])
    return out


_ABSENT = object()
