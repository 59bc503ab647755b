"""The health checks read a trajectory as NeMo Gym 0.7.0's do: validated and dumped (numeric
strings are numbers, a model_ref keeps its type and name, a payload too deep to dump is
unreadable), references bound by response id as well as by call id, the contradiction gaps,
the runaway rule's content test (a check that raises is a finding), the unordered failure rule
and the checks left unobserved without their evidence. One real rollouts file through
`gym-metrics health`; each row's verdict line is checked (tests/data/health/NEMO_GYM_BEHAVIOUR.md
says why each is NeMo Gym's). These rows, run through NeMo Gym 0.7.0's run_health_checks, get
these very verdict lines; tests/data/health/shapes.jsonl holds the same shapes on a collected
row, with NeMo Gym's reports recorded beside it (test_health.py compares ours to them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.cli import main

REF = {"type": "responses_api_models", "name": "policy"}
BY_ID = [{"model_call_id": "m1"}]
BY_BOTH = [{"model_call_id": "m1"}, {"model_call_id": "m2"}]


def _call(cid: str | None = "m1", rid: str | None = None, status: Any = 200, finish: str = "stop", tokens: tuple[Any, Any] = (5, 1),
          response: Any = None, started: float | None = None, ref: Any = REF) -> dict[str, Any]:  # fmt: skip
    return {"model_call_id": cid, "started_at": started, "response": response,
            "response_metadata": {"response_id": rid, "model_ref": ref, "status_code": status, "finish_reason": finish},
            "token_stats": {"prompt_tokens": tokens[0], "completion_tokens": tokens[1]}}  # fmt: skip


def _row(task: int, calls: list[dict[str, Any]], refs: list[dict[str, Any]], gaps: list[dict[str, Any]] | None = None,
         usage: dict[str, int] | None = None, answer: Any = "ok") -> dict[str, Any]:  # fmt: skip
    turn = {"invocation_id": "root", "task_id": "t", "rollout_id": f"r{task}", "turn_no": 1, "timestamp": 1.0, "answer": answer,
            "step_count": 1, "model_calls": refs}  # fmt: skip
    return {"_ng_task_index": task, "_ng_rollout_index": 0, "response": {"usage": usage} if usage else {},
            "ng_trajectory": {"task_id": "t", "rollout_id": f"r{task}", "turns": [turn], "model_calls": calls, "gaps": gaps or []}}  # fmt: skip


def _nested(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


FAILED = {"check": "model_call_failed", "locator": {"call_id": "m1"}, "detail": {"status": 500, "error_category": None, "terminal": True}}
ENDED = {"check": "rollout_ended_on_failed_model_call", "locator": {"call_id": "m1"},
         "detail": {"model_ref": "responses_api_models/policy", "status": 500, "error_category": None, "observed_calls": 1, "successful_calls": 0}}  # fmt: skip
TOKENS = ["rollout_token_count_mismatch"]  # no usage in the row: never observed
READING = ["rollout_missing_agent_turns", "rollout_ended_on_failed_model_call", "agent_turn_hollow", "model_call_zero_completion_tokens",
           "model_call_missing_token_counts", "trajectory_capture_mismatch", "model_call_failed", "rollout_token_count_mismatch",
           "model_call_runaway_generation"]  # fmt: skip
CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], list[str]]] = [
    ("status 500", _row(0, [_call(status=500)], BY_ID), [ENDED, FAILED], TOKENS),
    ("status and tokens as numeric strings: coerced", _row(1, [_call(status="500", tokens=("5", "1"))], BY_ID), [ENDED, FAILED], TOKENS),
    ("a model_ref's other keys dropped: the reference binds",
     _row(2, [_call()], [{"model_call_id": "m1", "model_ref": {**REF, "region": "x"}}]), [], TOKENS),
    ("255 levels: the dump fails", _row(3, [_call()], BY_ID, answer=_nested(255)),
     [{"check": "record_unreadable", "detail": {"reason": "canonical trajectory is unreadable", "error": "ValueError"}}], READING),
    ("254 levels: read", _row(4, [_call()], BY_ID, answer=_nested(254)), [], TOKENS),
    ("two calls answer one response reference", _row(5, [_call(None, "resp-1"), _call(None, "resp-1")], [{"model_ref": REF, "response_id": "resp-1"}]),
     [{"check": "trajectory_capture_mismatch", "locator": {"call_id": "resp-1"}, "detail": {"kind": "duplicated_captured_call", "count": 2}}],
     ["model_call_zero_completion_tokens", "model_call_missing_token_counts", "model_call_failed", *TOKENS, "model_call_runaway_generation"]),
    ("one call answers a response reference", _row(6, [_call(None, "resp-1")], [{"model_ref": REF, "response_id": "resp-1"}]), [], TOKENS),
    ("a contradiction gap", _row(7, [_call()], BY_ID, gaps=[{"code": "model_call_reference_conflict", "invocation_id": "root", "detail": "call:m9"}]),
     [{"check": "trajectory_capture_mismatch", "locator": {"call_id": "m9"},
       "detail": {"kind": "conflicting_call_ownership", "observation_gap": "model_call_reference_conflict", "invocation_id": "root"}}], TOKENS),
    ("cut at length, a string response: no content", _row(8, [_call(finish="length", response="a string")], BY_ID),
     [{"check": "model_call_runaway_generation", "locator": {"call_id": "m1"}, "detail": {"finish_reason": "length"}}], TOKENS),
    ("cut at length with output_text", _row(9, [_call(finish="length", response={"output_text": "hi"})], BY_ID), [], TOKENS),
    ("cut at length, a choice's message a string: the rule raises", _row(10, [_call(finish="length", response={"choices": [{"message": "hi"}]})], BY_ID),
     [{"check": "check_execution_error", "detail": {"reason": "check raised an unexpected exception", "failed_check": "model_call_runaway_generation",
                                                    "error": "AttributeError"}}], [*TOKENS, "model_call_runaway_generation"]),
    ("cut at length, no response captured", _row(11, [_call(finish="length")], BY_ID), [], [*TOKENS, "model_call_runaway_generation"]),
    ("unordered calls, the first failed: not said to end on it", _row(12, [_call(status=500), _call("m2")], BY_BOTH),
     [{**FAILED, "detail": {**FAILED["detail"], "terminal": False}}], TOKENS),
    ("a start time missing, a failure among successes: not said to end on it",
     _row(13, [_call("m1", started=1.0), _call("m2", status=500)], BY_BOTH),
     [{"check": "model_call_failed", "locator": {"call_id": "m2"}, "detail": {"status": 500, "error_category": None, "terminal": True}}], TOKENS),
    ("turns unavailable", _row(14, [_call()], BY_ID, gaps=[{"code": "turns_unavailable"}]), [], ["rollout_missing_agent_turns", "agent_turn_hollow", *TOKENS]),
    ("turn scope incomplete: usage not compared", _row(15, [_call()], BY_ID, gaps=[{"code": "turn_model_call_scope_incomplete"}],
                                                       usage={"input_tokens": 5, "output_tokens": 2}), [], TOKENS),
    ("usage compared", _row(16, [_call()], BY_ID, usage={"input_tokens": 5, "output_tokens": 2}),
     [{"check": "rollout_token_count_mismatch", "detail": {"transcript_prompt": 5, "transcript_completion": 2, "capture_prompt": 5, "capture_completion": 1}}], []),
    ("calls without a model_ref, the reference bound to none", _row(17, [_call(None, "resp-2", ref=None), _call(None, None, ref=None)], BY_ID),
     [{"check": "trajectory_capture_mismatch", "locator": {"call_id": "m1"}, "detail": {"kind": "missing_captured_call"}}],
     ["model_call_zero_completion_tokens", "model_call_missing_token_counts", "model_call_failed", *TOKENS, "model_call_runaway_generation"]),
]  # fmt: skip


def test_each_trajectory_shape_gets_nemo_gyms_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run.jsonl"
    run.write_text("".join(json.dumps(row) + "\n" for _, row, _, _ in CASES))
    assert main(["health", str(run), "-o", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.startswith("Rollout health: 18 checked, 0 healthy, 11 unhealthy, 7 unobserved\n")
    verdicts = [json.loads(line) for line in (tmp_path / "out" / "rollout_verdicts.jsonl").read_text().splitlines()]
    assert [v["_ng_task_index"] for v in verdicts] == list(range(len(CASES)))
    for (name, _, findings, unobserved), got in zip(CASES, verdicts):
        assert (got["findings"], got["unobserved"]) == (findings, unobserved), name
        assert got["verdict"] == ("unhealthy" if findings else "unobserved" if unobserved else "healthy"), name
    stats = json.loads((tmp_path / "out" / "quality_summary.json").read_text())["run"]["stats"]
    assert stats["duplicated_calls"] == {"replayed": 1, "rollouts": 1}  # the two calls of one response
    assert stats["tokens"]["capture_prompt"] == 5 * 21  # the string counts too
