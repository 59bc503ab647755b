"""Token counts that add up past 2**64 (scripts/fuzz_nemo_health.py): NeMo Gym 0.7.0's
`run_health_checks` fails on them writing its summary (orjson: "TypeError: Integer exceeds 64-bit
range", no report written); `gym-metrics health` writes both reports with the exact sums, in
the layout orjson gives every other run."""

from __future__ import annotations

import json
from pathlib import Path

import orjson

from gym_metrics.health import check_health

from test_health import DATA

BIG = 2**63
POLICY = {"type": "responses_api_models", "name": "policy"}
ANSWER = [{"type": "message", "content": [{"type": "output_text", "text": "hi"}]}]


def _call(i: int) -> dict[str, object]:
    return {"model_call_id": f"mc{i}", "started_at": float(i), "response": {"output": ANSWER}, "token_stats": {"prompt_tokens": BIG, "completion_tokens": 5},
            "response_metadata": {"response_id": f"r{i}", "model_ref": POLICY, "status_code": 200, "finish_reason": "stop"}}  # fmt: skip


def _turn(i: int) -> dict[str, object]:
    return {"invocation_id": "root", "task_id": "0", "rollout_id": "0-0", "turn_no": i + 1, "timestamp": float(i), "step_count": i,
            "answer": ANSWER, "model_calls": [{"model_call_id": f"mc{i}"}]}  # fmt: skip


def test_token_counts_past_64_bits_are_written_exactly(tmp_path: Path) -> None:
    rows = [{"_ng_task_index": 0, "_ng_rollout_index": 0, "response": {"usage": {"input_tokens": BIG, "output_tokens": 10}},
             "ng_trajectory": {"task_id": "0", "rollout_id": "0-0", "turns": [_turn(0), _turn(1)], "model_calls": [_call(0), _call(1)]}},
            {"_ng_task_index": 0, "_ng_rollout_index": 1, "response": {"usage": {"input_tokens": BIG, "output_tokens": 1}}}]  # fmt: skip
    path = tmp_path / "rollouts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    health = check_health(path, output_dir=tmp_path / "out", workers=1)
    summary = json.loads(health.summary_path.read_text())
    assert summary["run"]["stats"]["tokens"] == {"prompt": 2**64, "completion": 11, "capture_prompt": 2**64, "capture_completion": 10}
    first = json.loads(health.verdicts_path.read_text().splitlines()[0])
    assert first["findings"] == [{"check": "rollout_token_count_mismatch",
                                  "detail": {"transcript_prompt": BIG, "transcript_completion": 10, "capture_prompt": 2**64, "capture_completion": 10}}]  # fmt: skip
    assert health.line().startswith("Rollout health: 2 checked, 0 healthy, 1 unhealthy, 1 unobserved\n")


def test_the_wide_layout_is_orjsons() -> None:
    """Past 64 bits the summary and a verdict row are written by Python's json: byte for byte
    what orjson writes of the recorded reports."""
    from gym_metrics.health._summary import json_bytes

    summary = orjson.loads((DATA / "faults.nemo" / "quality_summary.json").read_bytes())
    wide = {**summary, "extra": 2**64}
    assert json_bytes(wide, orjson.OPT_INDENT_2) == orjson.dumps({**summary, "extra": 0}, option=orjson.OPT_INDENT_2).replace(b'"extra": 0', b'"extra": 18446744073709551616')
    for line in (DATA / "faults.nemo" / "rollout_verdicts.jsonl").read_bytes().splitlines(keepends=True):
        row = orjson.loads(line)
        assert json_bytes({**row, "z": 2**64}, orjson.OPT_APPEND_NEWLINE) == line[:-2] + b',"z":18446744073709551616}\n'
