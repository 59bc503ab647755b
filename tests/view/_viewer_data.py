"""Rollout rows for the viewer tests: an agent's episodes (prompt, a tool call and its output,
an answer, a reward), with markup and script in the texts a model could write."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

XSS = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
"""Text a row carries in its prompt, tool output and answer: shown as text, never run."""


def row(agent: str, task: int, rollout: int, reward: float, *, error: str | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "agent_ref": {"name": agent}, "_ng_task_index": task, "_ng_rollout_index": rollout,
        "responses_create_params": {"input": [{"role": "system", "content": "Be brief."},
                                              {"role": "user", "content": f"Task {task}: what is {task} + {rollout}? {XSS}"}],
                                    "tools": [{"type": "function", "name": "add", "parameters": {"type": "object"}}]},
        "response": {"id": f"r{task}-{rollout}", "output": [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": f"thinking about task {task}"}]},
            {"type": "function_call", "call_id": f"c{task}", "name": "add", "arguments": json.dumps({"a": task, "b": rollout})},
            {"type": "function_call_output", "call_id": f"c{task}", "output": json.dumps({"sum": task + rollout, "note": XSS})},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"The answer is {task + rollout}. {XSS}"}]},
        ]},
        "reward": reward, "judge_notes": XSS, "seconds": 0.5 + task / 10,
    }  # fmt: skip
    if error is not None:
        out = {k: v for k, v in out.items() if k not in ("reward", "response")}
        out["_gm_error"] = {"kind": error, "message": f"{error} on task {task}"}
    out.update(extra or {})
    return out


def write_run(path: Path, agent: str, tasks: int, repeats: int, reward: Callable[[int, int], float], errors: dict[int, str] | None = None) -> Path:
    errors = errors or {}
    with path.open("w") as f:
        for t in range(tasks):
            for r in range(repeats):
                f.write(json.dumps(row(agent, t, r, reward(t, r), error=errors.get(t) if r == 0 else None)) + "\n")
    return path
