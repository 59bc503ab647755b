"""What `collect` writes and aggregates for a verified rollout, as NeMo Gym 0.7.0's collection
does (issue 24, items 4-6): the verify response and the collector's keys, not every input
column; a re-scored rollouts file whose rows carry the last verify's outputs; a scored row whose
reward is not a number is passed through as it is."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from gym_metrics._transport.server import ServerConfig, start_server
from gym_metrics._transport.client import ResourcesClient
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.nemo_gym import relay_name
from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse
from gym_metrics.environments import SimpleResourcesServer


def _text(body: BaseVerifyRequest) -> str:
    return " ".join(
        c.get("text", "") for o in body.response.get("output", []) for c in o.get("content", []) if isinstance(c, dict)
    )


class MatchRequest(BaseVerifyRequest):
    expected_answer: str
    case_sensitive: bool = False


class MatchResponse(BaseVerifyResponse):
    expected_answer: str
    extracted_answer: str | None = None


class MatchEnv(SimpleResourcesServer):
    """NeMo Gym's `string_match` shape: the response echoes the request's own fields it
    declares (not `case_sensitive`, not the dataset's `id`)."""

    async def verify(self, body: MatchRequest) -> MatchResponse:
        got = _text(body).strip()
        same = got == body.expected_answer if body.case_sensitive else got.lower() == body.expected_answer.lower()
        return MatchResponse(
            responses_create_params=body.responses_create_params,
            response=body.response,
            expected_answer=body.expected_answer,
            extracted_answer=got,
            reward=float(same),
        )


class CallsRequest(BaseVerifyRequest):
    expected_answers: list[dict[str, Any]] = Field(default_factory=list)


class CallsResponse(BaseVerifyResponse):
    num_expected: int = 0
    num_predicted: int = 0
    predicted_calls: list[dict[str, Any]] = Field(default_factory=list)


class CallsEnv(SimpleResourcesServer):
    """NeMo Gym's `xlam_fc` pattern: `Response(**body.model_dump(), ...)`."""

    async def verify(self, body: CallsRequest) -> CallsResponse:
        calls = [{"name": o["name"]} for o in body.response.get("output", []) if o.get("type") == "function_call"]
        return CallsResponse(
            **body.model_dump(),
            reward=float(len(calls) == len(body.expected_answers)),
            num_expected=len(body.expected_answers),
            num_predicted=len(calls),
            predicted_calls=calls,
        )


def _answer(text: str, tokens: int = 7) -> dict[str, Any]:
    return {
        "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}],
        "usage": {"input_tokens": 3, "output_tokens": tokens, "total_tokens": 3 + tokens},
    }


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


async def _collect(env: SimpleResourcesServer, src: Path, out: Path, **options: Any):  # type: ignore[no-untyped-def]
    server = await start_server(env, ServerConfig(port=0, log_requests=False))
    try:
        async with ResourcesClient(server.address) as client:
            return await collect_async(client, src, out, CollectOptions(**options))
    finally:
        await server.stop(0)


def _dataset(tmp_path: Path) -> Path:
    """Task lines as a dataset has them: an `id` and a `case_sensitive` column."""
    answers = ["Paris", "paris", "Lyon", "80"]
    return _write(
        tmp_path / "in.jsonl",
        [
            {
                "id": 1000 + i,
                "case_sensitive": i % 2 == 0,
                "expected_answer": "Paris" if i < 3 else "80",
                "responses_create_params": {"input": [{"role": "user", "content": f"q{i}"}]},
                "response": _answer(a, tokens=5 + i),
                "agent_ref": {"name": "policy"},
            }
            for i, a in enumerate(answers)
        ],
    )


async def test_a_verified_row_is_the_verify_response_and_the_collectors_keys(tmp_path: Path) -> None:
    """Dataset columns the response does not hold are neither written nor aggregated (they
    were `mean/id` and `mean/case_sensitive`, in the key metrics too, and in every sample)."""
    result = await _collect(MatchEnv(), _dataset(tmp_path), tmp_path / "out.jsonl")
    rows = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["reward"] for r in rows] == [1.0, 1.0, 0.0, 1.0]  # "paris" matches where case does not count
    assert {tuple(sorted(r)) for r in rows} == {
        tuple(sorted(["responses_create_params", "response", "reward", "mask_sample", "expected_answer",
                      "extracted_answer", "_ng_task_index", "_ng_rollout_index", "agent_ref", "_ng_environment_server", "_ng_result_type"]))
    }  # fmt: skip
    assert {(r["_ng_environment_server"], r["_ng_result_type"]) for r in rows} == {("policy_environment_server", "legacy_agent")}
    assert list(rows[0])[-2:] == ["_ng_environment_server", "_ng_result_type"]  # stamped last, as NeMo Gym's collection does
    (entry,) = json.loads(result.metrics_path.read_text())
    fields = {k.split("/", 1)[1] for k in entry["agent_metrics"] if k.startswith("mean/")}
    assert "reward" in fields and not fields & {"id", "case_sensitive"}
    assert not any("id" in k.split("/") or "case_sensitive" in k for k in entry["key_metrics"])
    assert entry["agent_metrics"]["mean/output_tokens"] == 6.5  # usage still read from the response
    sample = entry["group_level_metrics"][0]["sample"]
    assert "id" not in sample and "case_sensitive" not in sample


async def test_keep_input_fields_writes_the_whole_input_row(tmp_path: Path) -> None:
    result = await _collect(MatchEnv(), _dataset(tmp_path), tmp_path / "out.jsonl", keep_input_fields=True)
    rows = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [1000, 1001, 1002, 1003] and rows[0]["extracted_answer"] == "Paris"
    (entry,) = json.loads(result.metrics_path.read_text())
    assert entry["agent_metrics"]["mean/id"] == 1001.5


async def test_the_cli_flag_keeps_input_fields(tmp_path: Path) -> None:
    server = await start_server(MatchEnv(), ServerConfig(port=0, log_requests=False))
    try:
        src = _dataset(tmp_path)
        for flags, out in (([], tmp_path / "a.jsonl"), (["--keep-input-fields"], tmp_path / "b.jsonl")):
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gym_metrics.cli", "collect", "--server", server.address,
                "--input", str(src), "--output", str(out), *flags,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
            assert proc.returncode == 0, err.decode()
        assert ["id" in json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()] == [False] * 4
        assert ["id" in json.loads(x) for x in (tmp_path / "b.jsonl").read_text().splitlines()] == [True] * 4
    finally:
        await server.stop(0)


async def test_a_rollouts_file_is_rescored_with_the_last_verifys_outputs_in_it(tmp_path: Path) -> None:
    """A rollouts file (its rows carry `num_expected`, `predicted_calls`, ... and here `reward`
    null) verified again: the request does not see the response's own fields, as NeMo Gym's
    request models do not, so `Response(**body.model_dump(), num_expected=...)` works (it raised
    TypeError: got multiple values for keyword argument 'num_expected', 5 rollouts of 5)."""
    call = {"type": "function_call", "name": "peers", "arguments": "{}", "call_id": "c", "id": "f"}
    rows = [
        {
            "responses_create_params": {"input": [{"role": "user", "content": f"q{i}"}]},
            "response": {"output": [call] * (i % 2)},
            "expected_answers": [{"name": "peers", "arguments": {}}] * (i % 2),
            "num_expected": 9, "num_predicted": 9, "num_correct": 9, "predicted_calls": [{"name": "old"}],
            "reward": None, "mask_sample": False, "extra_column": "kept",
            "_gm_error": {"kind": "verify_failed", "message": "the last run's"}, "_gm_stored_reward": 0.0,  # the last run's notes
        }
        for i in range(5)
    ]  # fmt: skip
    result = await _collect(CallsEnv(), _write(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl", default_agent="a")
    assert result.verified == 5 and not result.failed_agents
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert all("_gm_error" not in r and "_gm_stored_reward" not in r for r in out)  # echoed, a stale note failed the rollout
    assert [(r["reward"], r["num_expected"], r["num_predicted"]) for r in out] == [(1.0, i % 2, i % 2) for i in range(5)]
    assert out[0]["num_correct"] == 9 and out[0]["extra_column"] == "kept"  # other unknown fields still reach verify


async def test_a_scored_row_with_a_reward_that_is_not_a_number_is_passed_through(tmp_path: Path) -> None:
    """`"reward": "not-a-number"` is data, as `aggregate` reads it: the row is written as it is
    and its reward shown raw in rollout_infos (it was sent to verify, which failed on it)."""
    rows = [
        {"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": 0, "reward": reward}
        for t, reward in enumerate([1.0, "not-a-number", 0.0])
    ]
    src = _write(tmp_path / "in.jsonl", rows)
    result = await _collect(SimpleResourcesServer(), src, tmp_path / "out.jsonl")
    assert (result.verified, result.passed_through, result.failed_agents) == (0, 3, [])
    assert (tmp_path / "out.jsonl").read_bytes() == src.read_bytes()
    (entry,) = json.loads(result.metrics_path.read_text())
    infos = [i for g in entry["group_level_metrics"] for i in g["rollout_infos"]]
    assert [i["reward"] for i in infos] == [1.0, "not-a-number", 0.0]
    assert entry["non_numeric_counts"] == {"reward": 1}


@pytest.mark.parametrize(
    ("agent", "agent_type", "server"),
    [  # environment servers as NeMo Gym 0.7.0's shipped configs name them, or its basic case's metrics file
        ("example_session_state_mgmt_simple_agent", "simple_agent", "example_session_state_mgmt_environment_server"),
        ("wordle_gymnasium_agent", "gymnasium_agent", "wordle_environment_server"),
        ("critpt_agent", "critpt_agent", "critpt_agent_environment_server"),
        ("a", "simple_agent", "a_environment_server"),
        ("simple_agent", "simple_agent", "simple_agent_environment_server"),
    ],
)
def test_the_environment_server_is_named_as_nemo_gym_names_it(agent: str, agent_type: str, server: str) -> None:
    assert relay_name(agent, agent_type) == server
