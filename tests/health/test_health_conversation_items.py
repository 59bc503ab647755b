"""A trajectory's conversation items are validated as NeMo Gym 0.7.0's typed Responses-API input
items: a row holding one it refuses is unhealthy (`record_unreadable`, "canonical trajectory is
unreadable", the exception's name) with its trajectory checks unobserved. The expected verdicts
are NeMo Gym's own (`run_health_checks` on these rows, scripts/make_nemo_health_reference.py's
`nemo_reports`). Found by scripts/fuzz_nemo_health.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.health import check_health

ANSWER = {"type": "message", "role": "assistant", "id": "m", "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}
UNOBSERVED = ["rollout_missing_agent_turns", "rollout_ended_on_failed_model_call", "agent_turn_hollow", "model_call_zero_completion_tokens",
              "model_call_missing_token_counts", "trajectory_capture_mismatch", "model_call_failed", "rollout_token_count_mismatch",
              "model_call_runaway_generation"]  # fmt: skip
CASES: list[tuple[Any, str | None]] = [
    ({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a", "annotations": []}]}, "ValidationError"),  # an answer without id
    ({"type": "message", "role": "assistant", "id": "m", "content": [{"type": "output_text", "text": "a"}]}, "ValidationError"),  # a part without annotations
    ({"type": "function_call", "call_id": None, "name": "f", "arguments": "{}"}, "ValidationError"),
    ({"type": "message", "role": "assistant", "id": "m", "content": [{"type": [1]}]}, "TypeError"),  # an unhashable part type
    ({"type": "message", "role": "user", "content": [], "status": [1]}, "TypeError"),  # an unhashable status
    ({"foo": 1}, None),  # read as an MCP tool listing, whose fields are all optional
    ({"name": "f", "arguments": "{}"}, None),  # read as an MCP call
    ({"type": "reasoning", "id": "r", "summary": [{"text": "t"}]}, "ValidationError"),  # a summary part without type
]


def _row(n: int, item: Any) -> dict[str, Any]:
    policy = {"type": "responses_api_models", "name": "policy"}
    trajectory = {
        "task_id": str(n), "rollout_id": f"{n}-0",
        "invocations": [{"invocation_id": "root", "model_calls": [{"model_call_id": "mc0"}], "conversation": [{"role": "user", "content": "q"}, item]}],
        "turns": [{"invocation_id": "root", "task_id": str(n), "rollout_id": f"{n}-0", "turn_no": 1, "timestamp": 0.0, "step_count": 0,
                   "answer": [ANSWER], "model_calls": [{"model_call_id": "mc0"}]}],
        "model_calls": [{"model_call_id": "mc0", "started_at": 0.0, "token_stats": {"prompt_tokens": 5, "completion_tokens": 3},
                         "response_metadata": {"response_id": "resp-0", "model_ref": policy, "status_code": 200, "finish_reason": "stop"}}],
    }  # fmt: skip
    return {"_ng_task_index": n, "_ng_rollout_index": 0, "agent_ref": {"name": "alpha"}, "reward": 1.0,
            "response": {"usage": {"input_tokens": 5, "output_tokens": 3}}, "ng_trajectory": trajectory}  # fmt: skip


def _verdict(n: int, error: str | None) -> dict[str, Any]:
    if error is None:
        return {"_ng_task_index": n, "_ng_rollout_index": 0, "rollout_id": f"{n}-0", "verdict": "healthy", "findings": [], "unobserved": []}
    finding = {"check": "record_unreadable", "detail": {"reason": "canonical trajectory is unreadable", "error": error}}
    return {"_ng_task_index": n, "_ng_rollout_index": 0, "rollout_id": f"{n}-0", "verdict": "unhealthy", "findings": [finding], "unobserved": UNOBSERVED}


@pytest.mark.parametrize("workers", [1, 2])
def test_conversation_items_nemo_gym_refuses_make_the_row_unreadable(tmp_path: Path, workers: int) -> None:
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("".join(json.dumps(_row(n, item)) + "\n" for n, (item, _) in enumerate(CASES)))
    health = check_health([rollouts], output_dir=tmp_path / "out", workers=workers)
    verdicts = [json.loads(line) for line in health.verdicts_path.read_text().splitlines()]
    assert verdicts == [_verdict(n, error) for n, (_, error) in enumerate(CASES)]
    assert health.line().splitlines()[0] == "Rollout health: 8 checked, 2 healthy, 6 unhealthy, 0 unobserved"
