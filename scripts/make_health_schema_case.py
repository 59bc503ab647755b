"""tests/data/health/schema.jsonl: one rollout per rule of NeMo Gym 0.7.0's TrajectoryRecord 1.0
that a trajectory can break (a field it does not name, a negative count or duration, a status
or source it does not know, a turn number below 1, a tool call that ends before it starts, a
reference that names no call, repeated ids, a turn of another task, a gap without its code, a
task id that is not text), each a single change to the first row of clean.jsonl and its own
task; then that row unchanged, as a control. scripts/make_nemo_health_reference.py records
what NeMo Gym's health checks say of it (each unreadable but the control).

    .venv/bin/python scripts/make_health_schema_case.py
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "health"


def put(*path: Any, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(trajectory: dict[str, Any]) -> None:
        target = trajectory
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


CHANGES: list[Callable[[dict[str, Any]], None]] = [
    put("foo", value=1),
    put("turns", 0, "foo", value=1),
    put("model_calls", 0, "token_stats", "prompt_tokens", value=-1),
    put("model_calls", 0, "token_stats", "prompt_tokens", value=5.5),
    put("model_calls", 0, "duration_ms", value=-1.0),
    put("model_calls", 0, "response_metadata", "response_source", value="cloud"),
    put("model_calls", 0, "response_metadata", "latency_ttft_ms", value=-1.0),
    put("turns", 0, "turn_no", value=0),
    put("turns", 0, "step_count", value=-1),
    put("turns", 0, "task_id", value="another task"),
    put("turns", 1, "turn_no", value=1),
    put("turns", 0, "model_calls", 0, value={}),
    put("invocations", 0, "status", value="weird"),
    put("tool_calls", 0, "status", value="weird"),
    put("tool_calls", 0, "timing_source", value="guessed"),
    put("tool_calls", 0, "completed_at", value=1.0),
    put("gaps", value=[{"detail": "a gap without its code"}]),
    put("task_id", value=4),
    lambda t: t["model_calls"][1].__setitem__("model_call_id", t["model_calls"][0]["model_call_id"]),
]


def main() -> None:
    base = json.loads((DATA / "clean.jsonl").read_text().splitlines()[0])
    rows = []
    for task, change in enumerate([*CHANGES, lambda t: None]):
        row = copy.deepcopy(base)
        change(row["ng_trajectory"])
        rows.append({**row, "_ng_task_index": task, "_ng_rollout_index": 0})
    (DATA / "schema.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


if __name__ == "__main__":
    main()
