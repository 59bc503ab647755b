"""The reward client's record of what it scored: every completion as a rollout row appended
to one file (`RewardClient(record=PATH)`), so `gym-metrics aggregate` gives the training-time
metrics; ranks recording to one file take turns under a file lock."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson


def append_rows(path: Path, rows: Sequence[tuple[Any, int | None, Sequence[str]]], scored: Sequence[tuple[Sequence[str], Sequence[str]]]) -> None:
    """Append every scored completion as a rollout row (agent `step_<n>`, or `train` when
    the step is not known; a task per group, numbered on from the file's last row under a
    lock, so ranks recording to one file never share a task index). A verify answer that
    echoes neither gets the request and the completion (as a Responses object), so a recorded
    sample can be read. `rows`: (task row, step, completions' JSON) per group; `scored`: its
    (verify responses' JSON, errors)."""
    from gym_metrics.environments import text_response

    with path.open("ab+") as f:
        _lock(f)
        task = _next_task(f)
        lines = []
        for (row, step, completions), (responses, errors) in zip(rows, scored):
            base = row if isinstance(row, Mapping) else orjson.loads(row)
            agent = {"name": "train" if step is None else f"step_{step}"}
            for i, (text, error) in enumerate(zip(responses, errors)):
                entry = orjson.loads(text) if text else {**base, "_gm_error": {"kind": "verify_failed", "message": error}}
                if "response" not in entry and i < len(completions):
                    given = orjson.loads(completions[i])
                    entry = {"response": text_response(given) if isinstance(given, str) else given, **entry}
                if "responses_create_params" not in entry and "responses_create_params" in base:
                    entry = {"responses_create_params": base["responses_create_params"], **entry}
                lines.append(orjson.dumps({**entry, "agent_ref": agent, "_ng_task_index": task, "_ng_rollout_index": i}, option=orjson.OPT_SERIALIZE_NUMPY, default=repr) + b"\n")
            task += 1
        f.write(b"".join(lines))  # one write: whole lines or a cut last one
        f.flush()
        os.fsync(f.fileno())


def _lock(f: Any) -> None:
    """An exclusive lock on the open file until it is closed (none where fcntl is not)."""
    try:
        import fcntl
    except ImportError:  # Windows: one process per file
        return
    fcntl.flock(f.fileno(), fcntl.LOCK_EX)


def _next_task(f: Any) -> int:
    """The task index after the last row of the file `f` (open for reading; 0 when empty)."""
    end = f.seek(0, os.SEEK_END)
    if end == 0:
        return 0
    start, tail = end, b""
    while start > 0 and tail.count(b"\n") < 2:
        start = max(0, start - (1 << 16))
        f.seek(start)
        tail = f.read(end - start)
    last = tail.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    try:
        return int(orjson.loads(last)["_ng_task_index"]) + 1
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):  # not a file of ours: past any index it could hold
        f.seek(0)
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def cut_partial_line(path: Path) -> None:
    """Cut a last line a killed trainer left half-written (every row the trainer was told of is
    whole: rows are written before their rewards are handed back)."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    with path.open("rb+") as f:
        end = f.seek(0, os.SEEK_END)
        f.seek(end - 1)
        if f.read(1) == b"\n":
            return
        start = end
        while start > 0:  # back to the last newline, a chunk at a time (the file may be large)
            start = max(0, start - (1 << 16))
            f.seek(start)
            cut = f.read(end - start).rfind(b"\n")
            if cut >= 0:
                f.truncate(start + cut + 1)
                return
        f.truncate(0)
