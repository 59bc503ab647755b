"""Model-call capture (issue 39 item 1): every policy call of a generated rollout, each HTTP
attempt, on its row as NeMo Gym's `ng_model_call_capture`, against a scripted policy server and
a real math_exact server on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "collector"))
from test_collect_generate import ANSWERS, math_server, policy_config, prompt, rows_of, run, task_row, write_jsonl  # noqa: E402,F401

from gym_metrics.collector import CollectOptions
from gym_metrics.recording import CAPTURE_KEY, PAYLOAD_KEYS, token_stats
from gym_metrics.recording._items import as_dumped
from gym_metrics.testing import ScriptedPolicyServer

pytestmark = pytest.mark.timeout(60)
NEMO_PYTHON = os.environ.get("GYM_METRICS_NEMO_PYTHON")


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_every_attempt_is_recorded_with_status_timing_and_tokens(math_server: str, tmp_path: Path, api: str) -> None:
    src = write_jsonl(tmp_path / "tasks.jsonl", [task_row(t, _ng_task_index=t, _ng_rollout_index=0) for t in range(3)])
    with ScriptedPolicyServer(ANSWERS, fail_first=1) as policy:  # each prompt: a 503, then the answer
        result = await run(math_server, src, tmp_path / "out.jsonl", CollectOptions(target=policy_config(policy, api=api), capture_model_calls=True))
    assert result.generated == 3
    for row in rows_of(result.rollouts_path):
        capture = row[CAPTURE_KEY]
        task = row["_ng_task_index"]
        assert capture["rollout_id"] == f"{task}-0"
        failed, answered = capture["calls"]
        assert (failed["status_code"], failed["error_category"], failed["call_index"]) == (503, "upstream_error", 0)
        assert (answered["status_code"], answered["error_category"], answered["call_index"]) == (200, None, 1)
        assert answered["dialect"] == api and answered["model"] == "scripted" and answered["finish_reason"] in ("stop", None)
        words = len(prompt(task).split()), len(ANSWERS[prompt(task)].split())  # the scripted server's counts
        assert (answered["tokens_in"], answered["tokens_out"], answered["tokens_total"]) == (words[0], words[1], sum(words))
        for call in (failed, answered):
            assert call["started_at"] <= call["completed_at"] and call["latency_total_ms"] > 0
            assert len(call["model_call_id"]) == 32 and not set(PAYLOAD_KEYS) & call.keys()  # payloads only when asked
        assert capture["metrics"]["num_calls"] == 2 and capture["metrics"]["tokens_total"] == sum(words)


async def test_an_answers_time_to_first_byte_is_timed(math_server: str, tmp_path: Path) -> None:
    """`latency_ttft_ms` (NeMo Gym's model server times its answer's first body chunk): from
    sending to the answer's first byte, here the policy's 0.2 s, within the call's whole latency."""
    src = write_jsonl(tmp_path / "tasks.jsonl", [task_row(t, _ng_task_index=t, _ng_rollout_index=0) for t in range(2)])
    with ScriptedPolicyServer(ANSWERS, delay_s=0.2) as policy:
        result = await run(math_server, src, tmp_path / "out.jsonl", CollectOptions(target=policy_config(policy), capture_model_calls=True))
    calls = [call for row in rows_of(result.rollouts_path) for call in row[CAPTURE_KEY]["calls"]]
    assert len(calls) == 2 and all(190 <= call["latency_ttft_ms"] <= call["latency_total_ms"] for call in calls), calls


async def test_payloads_are_what_went_over_the_wire(math_server: str, tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "tasks.jsonl", [task_row(0, _ng_task_index=0, _ng_rollout_index=0)])
    with ScriptedPolicyServer(ANSWERS) as policy:
        result = await run(math_server, src, tmp_path / "out.jsonl", CollectOptions(target=policy_config(policy), capture_payloads=True))
        sent = policy.requests[0].body
    [call] = rows_of(result.rollouts_path)[0][CAPTURE_KEY]["calls"]
    assert call["request"] == sent and call["request"]["model"] == "scripted"
    assert call["response"]["choices"][0]["message"]["content"] == ANSWERS[prompt(0)]
    assert call["request_raw"] is None and call["response_raw"] is None


async def test_a_generation_that_fails_keeps_its_calls(math_server: str, tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "tasks.jsonl", [task_row(0)])
    with ScriptedPolicyServer(ANSWERS, fail_first=10) as policy:
        result = await run(math_server, src, tmp_path / "out.jsonl", CollectOptions(target=policy_config(policy, max_retries=2), capture_model_calls=True))
    [row] = rows_of(result.rollouts_path)
    assert row["_gm_error"]["kind"] == "generation"
    assert [c["status_code"] for c in row[CAPTURE_KEY]["calls"]] == [503, 503, 503]  # the first try and two retries


async def test_off_by_default_leaves_the_row_as_nemo_gym_writes_it(math_server: str, tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "tasks.jsonl", [task_row(0)])
    with ScriptedPolicyServer(ANSWERS) as policy:
        result = await run(math_server, src, tmp_path / "out.jsonl", CollectOptions(target=policy_config(policy)))
    assert CAPTURE_KEY not in rows_of(result.rollouts_path)[0]


async def test_the_collect_command_records_with_its_flag(math_server: str, tmp_path: Path) -> None:
    from gym_metrics.cli import main as cli_main

    src = write_jsonl(tmp_path / "tasks.jsonl", [task_row(0)])
    out = tmp_path / "out.jsonl"
    with ScriptedPolicyServer(ANSWERS) as policy:
        args = ["collect", "--server", math_server, "--input", str(src), "--output", str(out), "--policy-url", policy.url,
                "--policy-model", "scripted", "--capture-model-calls", "--capture-payloads"]  # fmt: skip
        assert await asyncio.to_thread(cli_main, args) == 0
    [call] = rows_of(out)[0][CAPTURE_KEY]["calls"]
    assert call["status_code"] == 200 and call["request"]["model"] == "scripted"


def test_token_stats_read_every_usage_shape_as_nemo_gym_does() -> None:
    assert token_stats({"input_tokens": 10, "output_tokens": 4, "output_tokens_details": {"reasoning_tokens": 2}}) == {
        "tokens_in": 10, "tokens_out": 4, "tokens_reasoning": 2, "tokens_total": 14, "cache_creation_tokens": None}  # fmt: skip
    assert token_stats({"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 11})["tokens_total"] == 11  # as said
    messages = token_stats({"input_tokens": 5, "output_tokens": 1, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20})
    assert (messages["tokens_in"], messages["cache_creation_tokens"]) == (125, 20)  # cache folded into the prompt size
    assert token_stats({"input_tokens": -1, "output_tokens": True})["tokens_in"] is None  # not a count
    assert token_stats(None)["tokens_total"] is None


@pytest.mark.skipif(not NEMO_PYTHON, reason="GYM_METRICS_NEMO_PYTHON names no venv with nemo-gym 0.7.0 (the reference tool itself, 1.4 GB)")
async def test_records_validate_as_nemo_gyms_model_call_records(math_server: str, tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "tasks.jsonl", [task_row(0, _ng_task_index=0, _ng_rollout_index=0)])
    with ScriptedPolicyServer(ANSWERS, fail_first=1) as policy:
        result = await run(math_server, src, tmp_path / "out.jsonl", CollectOptions(target=policy_config(policy), capture_payloads=True))
    calls = rows_of(result.rollouts_path)[0][CAPTURE_KEY]["calls"]
    check = (
        "import json, sys\nfrom nemo_gym.base_responses_api_model import ModelCallRecord\n"
        "for call in json.load(sys.stdin):\n"
        "    record = ModelCallRecord.model_validate(call)\n"
        "    assert list(record.model_dump()) == list(call), (list(record.model_dump()), list(call))\n"
        "    assert record.model_dump(mode='json') == call\n"
        "print('ok')\n"
    )
    nemo_gym_agrees(check, calls)


@pytest.mark.skipif(not NEMO_PYTHON, reason="GYM_METRICS_NEMO_PYTHON names no venv with nemo-gym 0.7.0 (the reference tool itself, 1.4 GB)")
@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_trajectory_is_what_nemo_gyms_record_dumps(math_server: str, tmp_path: Path, api: str) -> None:
    src = write_jsonl(tmp_path / "tasks.jsonl", [task_row(t, _ng_task_index=t, _ng_rollout_index=0) for t in range(3)])
    with ScriptedPolicyServer(ANSWERS, fail_first=1) as policy:
        result = await run(math_server, src, tmp_path / "out.jsonl", CollectOptions(target=policy_config(policy, api=api), trajectory=True))
    trajectories = [row["ng_trajectory"] for row in rows_of(result.rollouts_path)]
    check = (
        "import json, sys\nfrom nemo_gym.rollout_observability import TrajectoryRecord\n"
        "for t in json.load(sys.stdin):\n"
        "    assert json.dumps(TrajectoryRecord.model_validate(t).model_dump(mode='json')) == json.dumps(t)\n"
        "print('ok')\n"
    )
    nemo_gym_agrees(check, trajectories)


def nemo_gym_agrees(check: str, payload: Any) -> None:
    """Runs `check` (which reads `payload` as JSON on stdin and prints ok) in NeMo Gym's venv."""
    done = subprocess.run([str(NEMO_PYTHON), "-c", check], input=json.dumps(payload), capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr


async def test_a_single_turn_rollout_has_a_one_turn_trajectory(math_server: str, tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "tasks.jsonl", [task_row(2, _ng_task_index=2, _ng_rollout_index=0)])
    with ScriptedPolicyServer(ANSWERS, fail_first=1) as policy:
        result = await run(math_server, src, tmp_path / "out.jsonl", CollectOptions(target=policy_config(policy), trajectory=True))
    [row] = rows_of(result.rollouts_path)
    trajectory = row["ng_trajectory"]
    [turn] = trajectory["turns"]
    assert [c["response_metadata"]["status_code"] for c in trajectory["model_calls"]] == [503, 200]  # the retry is a call too
    assert list(trajectory["model_calls"][0]["response_metadata"]) == [  # every field, null where unknown, as NeMo Gym dumps them
        "response_id", "model_ref", "model", "dialect", "status_code", "response_status", "finish_reason", "upstream_attempted",
        "response_source", "upstream_status_code", "local_response_reason", "error_category", "latency_ttft_ms"]  # fmt: skip
    assert turn["model_calls"][0]["model_call_id"] == trajectory["model_calls"][1]["model_call_id"]  # the turn's answering call
    assert turn["answer"] == row["response"]["output"] and trajectory["tool_calls"] == []
    given = [{**m, "type": "message"} for m in row["responses_create_params"]["input"]]  # typed, as NeMo Gym's models read it
    assert turn["question"] == given
    conversation = trajectory["invocations"][0]["conversation"]  # as NeMo Gym's typed items dump (test_trajectory_items.py)
    assert conversation == [as_dumped(i) for i in [*given, *row["response"]["output"]]] and conversation[0]["phase"] is None
    assert [g["code"] for g in trajectory["gaps"]] == ["resolution_unavailable"]
