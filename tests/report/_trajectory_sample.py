"""Rollouts files with agent trajectories for the report tests: NeMo Gym's recorded
example_session_state_mgmt episodes (rows.jsonl joined with verify.jsonl, as collect writes
them), and a hand-made one with reasoning, parallel calls, a failed tool, markup in the model's
output and a single-turn answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

DATA = Path(__file__).resolve().parents[1] / "data" / "nemo_gym_agent" / "example_session_state_mgmt"
HOSTILE = "<script>document.title='pwned';window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">"


def recorded_rollouts(path: Path) -> Path:
    """The 10 recorded rollouts (5 tasks x 2) as one rollouts file."""
    rows = [orjson.loads(line) for line in (DATA / "rows.jsonl").read_bytes().splitlines()]
    verified = [orjson.loads(line) for line in (DATA / "verify.jsonl").read_bytes().splitlines()]
    path.write_bytes(b"".join(orjson.dumps({**row, **v}) + b"\n" for row, v in zip(rows, verified)))
    return path


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def _output(call_id: str, output: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def _message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def crafted_row(task: int, rollout: int, reward: float) -> dict[str, Any]:
    """An episode: reasoning, two parallel calls (one fails), a hostile tool output, an answer."""
    output = [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "I should look up the weather first."}]},
        _message("Let me check."),
        _call("c1", "get_weather", '{"city": "Paris", "units": {"temp": "C"}}'),
        _call("c2", "get_time", '{"tz": "Europe/Paris"}'),
        _output("c2", '{"error": "ValueError: unknown time zone"}'),
        _output("c1", HOSTILE),
        _message("It is 21 C in Paris. " + HOSTILE),
    ]
    return {
        "agent_ref": {"name": "weather_agent"}, "_ng_task_index": task, "_ng_rollout_index": rollout, "reward": reward,
        "responses_create_params": {"instructions": "You are a weather bot.",
                                    "input": [{"role": "user", "content": "What is the weather in Paris?"}],
                                    "tools": [{"type": "function", "name": "get_weather"}, {"type": "function", "name": "get_time"}]},
        "response": {"output": output, "usage": {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120}},
    }  # fmt: skip


def single_turn_row(task: int, rollout: int, reward: float) -> dict[str, Any]:
    """A single-turn answer: a text response, no trajectory."""
    return {"agent_ref": {"name": "weather_agent"}, "_ng_task_index": task, "_ng_rollout_index": rollout, "reward": reward,
            "responses_create_params": {"input": "What is 6 x 7?"}, "response": {"output_text": "42"}}  # fmt: skip


def crafted_rollouts(path: Path, tasks: int = 3, repeats: int = 2) -> Path:
    """Task 0: episodes; the others: single-turn answers."""
    rows = [crafted_row(t, r, float(r % 2)) if t == 0 else single_turn_row(t, r, 1.0) for t in range(tasks) for r in range(repeats)]
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


def aggregated(rollouts: Path) -> Path:
    """The metrics file of `rollouts`, beside it (<stem>_aggregate_metrics.json)."""
    from gym_metrics.aggregate import aggregate_file

    out, _, _ = aggregate_file(rollouts)
    return out
