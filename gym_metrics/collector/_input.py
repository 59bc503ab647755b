"""Read the collector's input JSONL line by line: each line is a task or a rollout of an agent.

A line with a top-level numeric `reward` is already verified and goes straight to the output;
any other line is a verify request. Task lines (no task index) take their line position as the
task index, as NeMo Gym does, and `--num-repeats K` expands each line into rollouts 0..K-1.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from gym_metrics.aggregate._columns import ROLLOUT_KEY, ROLLOUT_KEY_ALIASES, TASK_KEY, TASK_KEY_ALIASES, parse_row
from gym_metrics.aggregate._columns import row_index_value
from gym_metrics.aggregate._reader import BadLine
from gym_metrics.errors import InvalidInputError


@dataclass
class Rollout:
    """One rollout of the input: its key, its row (indices set) and whether it needs verifying."""

    agent: str
    task: int
    rollout: int
    row: dict[str, Any]
    verified: bool
    raw: bytes | None = None
    """The input line itself, when it can be written out unchanged."""


def read_input(path: Path, num_repeats: int | None) -> Iterator[Rollout | BadLine]:
    """Rollouts (or bad lines) in file order; constant memory."""
    with path.open("rb") as f:
        for line_no, raw in enumerate(f, start=1):
            raw = raw.strip()
            if not raw:
                continue
            try:
                yield from _rollouts(raw, line_no, num_repeats)
            except _Bad as bad:
                yield BadLine(line_no, bad.field, bad.reason)


class _Bad(Exception):
    def __init__(self, field: str, reason: str) -> None:
        self.field, self.reason = field, reason


def _rollouts(raw: bytes, line_no: int, num_repeats: int | None) -> Iterator[Rollout]:
    try:
        row = parse_row(raw)
    except ValueError as exc:
        raise _Bad("json", f"not valid JSON ({exc})") from None
    if not isinstance(row, dict):
        raise _Bad("row", f"expected a JSON object, got {type(row).__name__}")
    ref = row.get("agent_ref")
    if not isinstance(ref, dict) or not isinstance(ref.get("name"), str) or not ref["name"]:
        raise _Bad("agent_ref.name", "missing or not a string (every line must name its agent)")
    agent = ref["name"]
    try:
        task = row_index_value(row, TASK_KEY_ALIASES) if _has_any(row, TASK_KEY_ALIASES) else line_no - 1
        given_rollout = row_index_value(row, ROLLOUT_KEY_ALIASES) if _has_any(row, ROLLOUT_KEY_ALIASES) else None
    except InvalidInputError as exc:
        v = exc.violations[0]
        raise _Bad(v.field, v.description) from None
    reward = row.get("reward")
    verified = isinstance(reward, (int, float)) and num_repeats is None
    if num_repeats is None:
        rollout = given_rollout if given_rollout is not None else 0
        keeps_raw = row.get(TASK_KEY) == task and row.get(ROLLOUT_KEY) == rollout
        yield Rollout(agent, task, rollout, _with_keys(row, task, rollout), verified, raw if keeps_raw else None)
        return
    for r in range(num_repeats):
        yield Rollout(agent, task, r, _with_keys(row, task, r), False)


def _has_any(row: dict[str, Any], keys: tuple[str, ...]) -> bool:
    return any(row.get(k) is not None for k in keys)


def _with_keys(row: dict[str, Any], task: int, rollout: int) -> dict[str, Any]:
    out = dict(row)
    out[TASK_KEY] = task
    out[ROLLOUT_KEY] = rollout
    return out


def dumps_row(row: dict[str, Any]) -> bytes:
    """A row as one JSONL line (NaN becomes null: the output is strict JSON)."""
    return orjson.dumps(row, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n"
