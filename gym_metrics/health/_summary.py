"""What a run's digest columns add up to: rollouts that claim one identity, the task checks over
each task's repeats, NeMo Gym's quality summary and verdict rows, and the counts per agent the
metrics file keeps. Grouping and ordering run in numpy over codes of the keys, so their cost
grows with rollouts only through a few vector passes."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
import orjson

from gym_metrics.health._checks import CHECKS, ROLLOUT, ROLLOUT_CHECKS, TASK, TASK_CHECKS, finding
from gym_metrics.health._table import Table

VERDICTS = ("healthy", "unhealthy", "unobserved")
HEALTHY, UNHEALTHY, UNOBSERVED = 0, 1, 2


def json_bytes(value: Any, option: int = 0) -> bytes:
    """`value` as orjson writes it (`option`: OPT_INDENT_2, OPT_APPEND_NEWLINE); one holding an
    integer past 64 bits, which orjson refuses, in the same layout by Python's json. A run whose
    token counts add up past 2**64 (its summary's sums, a finding's capture sums) is written with
    the exact sums: NeMo Gym 0.7.0's run fails there, on orjson's "Integer exceeds 64-bit range"."""
    try:
        return orjson.dumps(value, option=option)
    except TypeError as exc:
        if "64-bit" not in str(exc):
            raise
    indented = bool(option & orjson.OPT_INDENT_2)
    text = json.dumps(value, ensure_ascii=False, indent=2 if indented else None, separators=(",", ": ") if indented else (",", ":"))
    return (text + "\n" if option & orjson.OPT_APPEND_NEWLINE else text).encode()


def code(values: list[Any]) -> tuple[np.ndarray, list[Any]]:
    """Each value's code (equal values, equal codes) and the values coded. Integers are coded
    by numpy in order; anything else by a dict (Python's equality: 1 and "1" differ)."""
    if values.count(None) == len(values):
        return np.zeros(len(values), np.int64), [None] if values else []
    arr = np.array(values) if values else np.zeros(0, np.int64)
    if arr.dtype.kind == "i":
        uniques, codes = np.unique(arr, return_inverse=True)
        return codes.reshape(-1), uniques.tolist()
    seen: dict[Any, int] = {}
    codes = np.fromiter((seen.setdefault(v, len(seen)) for v in values), np.int64, len(values))
    return codes, list(seen)


def _order_key(v: Any) -> tuple[int, Any]:
    return (0, v) if isinstance(v, int) else (1, str(v))


def _ranks(values: list[Any]) -> np.ndarray:
    """Each value's rank under NeMo Gym's verdict-row order (ints first by value, then the rest
    by their text; None and "None" rank alike)."""
    if values.count(None) == len(values):
        return np.zeros(len(values), np.int64)
    arr = np.array(values)
    if arr.dtype.kind == "i":  # integers (within int64): numpy's order is theirs
        return np.unique(arr, return_inverse=True)[1].reshape(-1)
    codes, uniques = code(values)
    keys = [_order_key(u) for u in uniques]
    rank = {k: i for i, k in enumerate(sorted(set(keys)))}
    return np.array([rank[k] for k in keys], dtype=np.int64)[codes] if len(codes) else codes


def _group(*codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's group (rows whose codes all agree) and the size of each group."""
    sizes = [int(c.max()) + 1 if len(c) else 1 for c in codes]
    if float(np.prod([float(s) for s in sizes])) < 2.0**62:
        key = codes[0].astype(np.int64)
        for c, size in zip(codes[1:], sizes[1:]):
            key = key * size + c
        _, group, counts = np.unique(key, return_inverse=True, return_counts=True)
    else:
        _, group, counts = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True, return_counts=True)
    return group.reshape(-1), counts


def flag_duplicates(table: Table, task: np.ndarray, rollout: np.ndarray, ignored: frozenset[str]) -> None:
    """Every record of a (stage, task, rollout) claimed more than once gets the finding."""
    if "rollout_duplicate_identity" in ignored or not len(table):
        return
    group, counts = _group(code(table.stage)[0], task, rollout)
    copies = counts[group]
    for row in np.flatnonzero(copies > 1).tolist():
        table.findings.setdefault(row, []).append(finding("rollout_duplicate_identity", {"duplicate_count": int(copies[row])}))


def verdicts(table: Table) -> np.ndarray:
    """Each row's verdict code: unhealthy with a finding, else unobserved with a check unobserved."""
    some = np.array([bool(s) for s in table.sets], dtype=bool)
    out = np.where(some[np.asarray(table.unobserved, dtype=np.int64)], UNOBSERVED, HEALTHY).astype(np.int8) if len(table) else np.zeros(0, np.int8)
    out[list(table.findings)] = UNHEALTHY
    return out


@dataclass
class TaskChecks:
    """The task checks' results: each row's task code, the tasks, and per task its counts."""

    code: np.ndarray
    values: list[Any]
    repeats: np.ndarray
    by_verdict: np.ndarray
    """(tasks, 3): repeats per folded verdict."""
    flags: dict[int, list[dict[str, Any]]]
    coverage: dict[str, dict[str, int]]


def task_checks(table: Table, task: np.ndarray, values: list[Any], rollout: np.ndarray, verdict: np.ndarray, ignored: frozenset[str]) -> TaskChecks:
    """NeMo Gym's two task checks over each task's repeats (records of one repeat folded into
    one: verdicts that differ make it unobserved; calls observed if all were; its most
    successful calls)."""
    repeat, sizes = _group(task, rollout)
    n = len(sizes)
    low, high = np.full(n, 9, np.int8), np.full(n, -1, np.int8)
    np.minimum.at(low, repeat, verdict)
    np.maximum.at(high, repeat, verdict)
    folded = np.where(low == high, low, UNOBSERVED)
    observed, successful = np.ones(n, np.int64), np.zeros(n, np.int64)
    np.minimum.at(observed, repeat, table.column("policy_calls_observed").astype(np.int64))
    np.maximum.at(successful, repeat, np.minimum(table.column("successful_calls"), 1).astype(np.int64))
    owner = np.zeros(n, np.int64)
    owner[repeat] = task
    tasks = len(values)
    by_verdict = np.bincount(owner * 3 + folded, minlength=tasks * 3).reshape(tasks, 3)
    repeats = by_verdict.sum(axis=1)
    all_observed, any_success = np.ones(tasks, np.int64), np.zeros(tasks, np.int64)
    np.minimum.at(all_observed, owner, observed)
    np.maximum.at(any_success, owner, successful)
    computable = by_verdict[:, HEALTHY] + by_verdict[:, UNHEALTHY]
    consistent = "task_consistently_unhealthy"
    coverage = {c: {"evaluated": 0, "unobserved": 0, "ignored": 0} for c in TASK_CHECKS}
    flags: dict[int, list[dict[str, Any]]] = {}
    if consistent in ignored:
        coverage[consistent]["ignored"] = tasks
    else:
        coverage[consistent]["evaluated"] = int((computable >= 2).sum())
        coverage[consistent]["unobserved"] = tasks - coverage[consistent]["evaluated"]
        for t in np.flatnonzero((computable >= 2) & (by_verdict[:, HEALTHY] == 0)).tolist():
            flags.setdefault(t, []).append(finding(consistent, {"computable_repeats": int(computable[t])}))
    no_calls = "task_no_successful_model_calls"
    if no_calls in ignored:
        coverage[no_calls]["ignored"] = tasks
    else:
        coverage[no_calls]["evaluated"] = int(all_observed.sum())
        coverage[no_calls]["unobserved"] = tasks - coverage[no_calls]["evaluated"]
        for t in np.flatnonzero((all_observed == 1) & (any_success == 0)).tolist():
            flags.setdefault(t, []).append(finding(no_calls, {"repeats": int(repeats[t])}))
    return TaskChecks(task, values, repeats, by_verdict, flags, coverage)


def _total(column: np.ndarray) -> int:
    return int(column.sum())


def summary(table: Table, verdict: np.ndarray, tasks: TaskChecks, ignored: Sequence[str]) -> dict[str, Any]:
    """NeMo Gym's quality summary."""
    skip = frozenset(ignored)
    rows = len(table)
    per_set = np.bincount(np.asarray(table.unobserved, dtype=np.int64), minlength=len(table.sets)) if rows else np.zeros(len(table.sets), np.int64)
    coverage = {c: {"evaluated": 0, "unobserved": 0, "ignored": 0} for c in CHECKS}
    for check in ROLLOUT_CHECKS:
        if check in skip:
            coverage[check]["ignored"] = rows
        else:
            unobserved = sum(int(per_set[i]) for i, s in enumerate(table.sets) if check in s)
            coverage[check].update(evaluated=rows - unobserved, unobserved=unobserved)
    coverage.update(tasks.coverage)
    issues = issue_counts(table, tasks)
    statuses: Counter[str] = Counter()
    for found in table.statuses.values():
        statuses.update(found)
    counted = np.bincount(verdict, minlength=3)
    per_task = {}
    values, by_verdict, repeats, flags = tasks.values, tasks.by_verdict.tolist(), tasks.repeats.tolist(), tasks.flags
    names = [str(v) for v in values]
    texts = [isinstance(v, str) for v in values]
    for t in sorted(range(len(values)), key=names.__getitem__ if not any(texts) else lambda i: (texts[i], names[i])):
        h, u, o = by_verdict[t]
        per_task[names[t]] = {"repeats": repeats[t], "healthy": h, "unhealthy": u, "unobserved": o,
                              "flags": [f["check"] for f in flags[t]] if t in flags else []}  # fmt: skip
    errors, duplicated = table.column("call_errors"), table.column("duplicated_calls")
    return {
        "run": {
            "ignored_checks": sorted(skip),
            "artifacts": {"records": rows, "captures": _total(table.column("calls_seen")), "coverage": coverage},
            "verdicts": {v: int(counted[i]) for i, v in enumerate(VERDICTS)},
            "issues": issues,
            "stats": {
                "model_call_errors": {
                    "total": _total(errors), "by_status": dict(sorted(statuses.items())),
                    "rollouts_affected": int((errors > 0).sum()), "ended_on_error": _total(table.column("ended_on_error")),
                },
                "duplicated_calls": {"replayed": _total(duplicated), "rollouts": int((duplicated > 0).sum())},
                "tokens": {
                    "prompt": _total(table.column("usage_prompt")), "completion": _total(table.column("usage_completion")),
                    "capture_prompt": _total(table.column("capture_prompt")), "capture_completion": _total(table.column("capture_completion")),
                },
            },
        },
        "tasks": per_task,
    }  # fmt: skip


def issue_counts(table: Table, tasks: TaskChecks, rows: np.ndarray | None = None) -> dict[str, int]:
    """Findings per check (of `rows` only, when given: a boolean mask), and the flags of the
    tasks those rows belong to."""
    if rows is None:
        found = list(table.findings.values())
        flagged = list(tasks.flags.values())
    else:
        found = [f for row, f in table.findings.items() if rows[row]]
        mine = set(np.unique(tasks.code[rows]).tolist())
        flagged = [f for t, f in tasks.flags.items() if t in mine]
    issues = Counter(f["check"] for group in (*found, *flagged) for f in group)
    return {c: issues[c] for c in CHECKS}


_KEYS = b'{"_ng_task_index":%b,"_ng_rollout_index":%b,"rollout_id":%b%b'
_INTS = b'{"_ng_task_index":%d,"_ng_rollout_index":%d,"rollout_id":"%d-%d"%b'
"""A row without findings or stage: its keys and id, then a tail its verdict and unobserved
checks share with others (the bytes orjson writes for the whole row)."""


def _line(table: Table, row: int, verdict: str, tail: bytes) -> bytes:
    t, r, given, stage, dumps = table.task[row], table.rollout[row], table.ids[row], table.stage[row], json_bytes
    if row not in table.findings and stage is None:
        return _KEYS % (dumps(t), dumps(r), dumps(f"{t}-{r}" if given is None else given), tail)
    entry = {TASK: t, ROLLOUT: r, "rollout_id": f"{t}-{r}" if given is None else given, "verdict": verdict,
             "findings": table.findings.get(row, []), "unobserved": table.sets[table.unobserved[row]]}  # fmt: skip
    if stage is not None:
        entry["stage_index"] = stage
    return dumps(entry, orjson.OPT_APPEND_NEWLINE)


def verdict_rows(table: Table, verdict: np.ndarray, chunk: int = 1 << 16) -> Iterator[bytes]:
    """The verdicts file, in (task, rollout, stage) order (records of one key in run order).
    Where every task and rollout index is an integer, the plain rows of a chunk are formatted
    in one pass (map over zip) and only the others one by one."""
    n = len(table)
    order = np.lexsort((_ranks(table.stage), _ranks(table.rollout), _ranks(table.task))) if n else np.zeros(0, np.int64)
    sets, names = table.sets, [v.encode() for v in VERDICTS]
    tails = [b',"verdict":"%b","findings":[],"unobserved":%b}\n' % (v, orjson.dumps(u)) for v in names for u in sets]
    tail = (verdict.astype(np.int64) * len(sets) + np.asarray(table.unobserved, dtype=np.int64)).tolist() if n else []
    tasks, rollouts = np.array(table.task), np.array(table.rollout)
    ints = n > 0 and tasks.dtype.kind == "i" and rollouts.dtype.kind == "i"
    other = np.zeros(n, dtype=bool)
    other[list(table.findings)] = True
    for column in (table.stage, table.ids):
        if column.count(None) != n:
            other |= np.fromiter((v is not None for v in column), bool, n)
    codes = verdict.tolist()
    for lo in range(0, n, chunk):
        rows = order[lo : lo + chunk]
        if not ints:
            yield b"".join([_line(table, row, VERDICTS[codes[row]], tails[tail[row]]) for row in rows.tolist()])
            continue
        t, r = tasks[rows].tolist(), rollouts[rows].tolist()
        lines = list(map(_INTS.__mod__, zip(t, r, t, r, [tails[tail[row]] for row in rows.tolist()])))
        for j in np.flatnonzero(other[rows]).tolist():
            row = int(rows[j])
            lines[j] = _line(table, row, VERDICTS[codes[row]], tails[tail[row]])
        yield b"".join(lines)


def write_verdicts(f: IO[bytes], table: Table, verdict: np.ndarray) -> None:
    for blob in verdict_rows(table, verdict):
        f.write(blob)
