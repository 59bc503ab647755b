"""A task row with no response, collected with no policy, is never scored 0 without a word
(issue 36, item 5): where the environment needs a response (its request model requires one, as
the README's environment's does, or it has tools) such a row fails before verify, naming
--policy-url; math_exact, whose rows may give `model_output` instead, refuses a row with
neither. The rows are failed rollouts in the output, the summary says why, and a run whose
every row failed exits 3."""

from __future__ import annotations

import io
import json
import sys
import tempfile
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer, cli
from gym_metrics.environments._registry import resolve_server

sys.path.insert(0, str(Path(__file__).parents[1]))
from _tool_envs import Counter  # noqa: E402
from _transport_helpers import server_in_thread  # noqa: E402

pytestmark = pytest.mark.timeout(60)
ANSWER = {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "The answer is 4."}]}]}


class NeedsResponse(BaseVerifyRequest):
    response: dict  # required, as in the README's environment
    expected_answer: str


class Readme(SimpleResourcesServer):
    async def verify(self, body: NeedsResponse) -> BaseVerifyResponse:
        return BaseVerifyResponse(reward=float("4" in json.dumps(body.response)))


def collect(env: SimpleResourcesServer, rows: list[dict[str, Any]], tmp_path: Path) -> tuple[int, str, list[dict[str, Any]]]:
    tmp_path = Path(tempfile.mkdtemp(dir=tmp_path))
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps({"agent_ref": {"name": "a"}, **row}) + "\n" for row in rows))
    printed = io.StringIO()
    with server_in_thread(env) as address, redirect_stdout(printed):
        code = cli.main(["collect", "--server", address, "--input", str(src), "--output", str(out)])
    return code, printed.getvalue(), [json.loads(line) for line in out.read_text().splitlines()]


@pytest.mark.parametrize("env", [Readme(), Counter()], ids=["response-required", "tools"])
def test_rows_without_a_response_fail_naming_the_policy(env: SimpleResourcesServer, tmp_path: Path) -> None:
    task = {"responses_create_params": {"input": "What is 2+2?"}, "expected_answer": "4", "expected_count": 0}
    code, printed, rows = collect(env, [task, task], tmp_path)
    assert code == 3 and "2 rows without a response failed (no --policy-url to generate one)" in printed
    assert [r["_gm_error"]["kind"] for r in rows] == ["generation"] * 2 and "reward" not in rows[0]
    assert "--policy-url" in rows[0]["_gm_error"]["message"] and "input line 1" in rows[0]["_gm_error"]["message"]
    if isinstance(env, Readme):  # a row with its response beside them is verified as always
        code, printed, rows = collect(env, [task, {**task, "response": ANSWER}], tmp_path)
        assert code == 0 and [r.get("reward") for r in rows] == [None, 1.0]


def test_math_exact_refuses_a_row_with_no_answer_at_all(tmp_path: Path) -> None:
    task = {"responses_create_params": {"input": "What is 2+2?"}, "expected_answer": "4"}
    code, printed, rows = collect(resolve_server("math_exact")(), [task, {**task, "model_output": "4"}, {**task, "response": ANSWER}], tmp_path)
    assert code == 0 and [r.get("reward") for r in rows] == [None, 1.0, 1.0]
    assert rows[0]["_gm_error"]["kind"] == "invalid_request" and "--policy-url" in rows[0]["_gm_error"]["message"]
    code, _, rows = collect(resolve_server("math_exact")(), [task], tmp_path)
    assert code == 3 and rows[0]["_gm_error"]["kind"] == "invalid_request"


class NanReward(SimpleResourcesServer):
    """NaN for the rows asking for it, infinity for one, 1.0 for the others."""

    async def verify(self, body: NeedsResponse) -> BaseVerifyResponse:
        return BaseVerifyResponse(reward={"nan": float("nan"), "inf": float("inf")}.get(body.expected_answer, 1.0))


def test_a_nan_reward_is_null_in_the_row_left_out_as_nemo_gym_leaves_it_and_said(tmp_path: Path) -> None:
    """NeMo Gym's server writes a NaN reward as null and its stats drop it (checked against
    0.7.0: FastAPI's serialization, pandas' dropna): the same numbers here, but not silently."""
    rows = [{"response": ANSWER, "expected_answer": e, "responses_create_params": {"input": "q"}} for e in ("nan", "4", "inf", "4", "nan")]
    code, printed, out = collect(NanReward(), rows, tmp_path)
    assert code == 0 and "3 rollouts verified without a reward (verify gave NaN or infinity" in printed
    assert sorted(str(r["reward"]) for r in out) == ["1.0", "1.0", "None", "None", "None"]
    assert "a      1.0000" in printed  # the mean of the two rewards there are
    code, printed, _ = collect(Readme(), [{"response": ANSWER, "expected_answer": "4", "responses_create_params": {"input": "q"}}], tmp_path)
    assert code == 0 and "without a reward" not in printed
