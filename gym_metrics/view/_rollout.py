"""One rollout as the viewer opens it: the whole row (every field, for the page to lay out and
to show raw), its health findings checked now, and the verdict on record."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gym_metrics._util.jsonio import loads
from gym_metrics.errors import InvalidInputError
from gym_metrics.health import check_rollout
from gym_metrics.rollouts import too_deep
from gym_metrics.view._index import VERDICTS, RunIndex

MAX_ROW_BYTES = 64 << 20
"""A row longer than this is sent as its first bytes of text only (a browser would stall)."""
MAX_ROW_DEPTH = 200
"""A row nested deeper is sent as its text: the answer's JSON writers stop near 254 levels."""


def rollout(index: RunIndex, line: int) -> dict[str, Any]:
    """The row on `line` (1-based); LookupError when that line is not an indexed row."""
    snap = index.snapshot
    at = int(snap.columns.line.searchsorted(line))
    if at >= len(snap.columns) or int(snap.columns.line[at]) != line:
        raise LookupError(f"line {line} of {index.path.name} is not a rollout row (blank, bad, or not written yet)")
    raw = index.row_bytes(line)
    c = snap.columns
    out: dict[str, Any] = {
        "line": line, "agent": snap.agents[int(c.agent[at])], "task": int(c.task[at]), "rollout": int(c.rollout[at]),
        "verdict_on_record": VERDICTS[int(c.verdict[at])], "bytes": len(raw),
        "previous": int(c.line[at - 1]) if at > 0 else None, "next": int(c.line[at + 1]) if at + 1 < len(c) else None,
    }  # fmt: skip
    if len(raw) > MAX_ROW_BYTES or deep(raw):
        out.update(row=None, raw=raw[:MAX_ROW_BYTES].decode("utf-8", "replace"), cut=len(raw) > MAX_ROW_BYTES, health=None)
        return out
    row = loads(raw)
    out.update(row=plain(row), raw=None, cut=False, health=_health(row, str(index.path), line))
    return out


def deep(raw: bytes) -> bool:
    """Whether a row nests past MAX_ROW_DEPTH (shown as its text, not laid out). `too_deep`
    without its compiled scanner counts a line's brackets, not their depth, so its yes is
    confirmed here: a shallow row of many lists was shown as bare text where no compiler built
    the scanner."""
    if not too_deep(raw, np.zeros(1, np.int64), np.array([len(raw)]), MAX_ROW_DEPTH):
        return False
    try:
        return _depth(loads(raw)) > MAX_ROW_DEPTH
    except ValueError:  # not JSON, or past the parser's own depth
        return True


def _depth(value: Any) -> int:
    """How deep `value` nests lists and objects (a bare list or object: 1)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            todo.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _health(row: dict[str, Any], path: str, line: int) -> dict[str, Any]:
    """The rollout's own checks (the duplicate and task checks need the whole run: `gym-metrics
    health` runs those)."""
    try:
        d = check_rollout(row, None, (path, 0, line, 0), frozenset())
    except ValueError as exc:  # an index NeMo Gym refuses: the record itself is bad
        return {"verdict": "unhealthy", "findings": [{"check": "record_unreadable", "detail": str(exc)}], "unobserved": []}
    return {"verdict": d.verdict, "findings": d.findings, "unobserved": d.unobserved}


def plain(value: Any, depth: int = 0) -> Any:
    """`value` as JSON a browser parses: NaN and infinities as their names, integers beyond 53
    bits as text (JavaScript numbers would round them). InvalidInputError past MAX_ROW_DEPTH
    levels (the recursion would fail past Python's limit, and the answer's writers)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value).replace("inf", "Infinity").replace("nan", "NaN")
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if -(2**53) <= value <= 2**53 else str(value)
    if isinstance(value, (dict, list)) and depth >= MAX_ROW_DEPTH:
        raise InvalidInputError(f"nested deeper than {MAX_ROW_DEPTH} levels: not shown")
    if isinstance(value, dict):
        return {str(k): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v, depth + 1) for v in value]
    return str(value)


def nests_deeper(value: Any, limit: int) -> bool:
    """Whether `value` holds lists and objects more than `limit` levels deep (without
    recursion: a file's JSON may nest past Python's limit)."""
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if level >= limit:
            return True
        stack.extend((c, level + 1) for c in children)
    return False
