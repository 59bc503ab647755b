"""A verify answer that is no reward to train on fails its completion at every trainer door,
named, instead of reaching the trainer as a number: a NeMo Gym environment whose judge failed
(scored 0 and masked, `mask_sample`) was a plain 0 at ScoreGroups, /get_reward, /score_groups,
TRL, verl and NeMo RL alike; a NaN or infinite reward was a NaN trained on (verl, NeMo RL), or a
`null` beside `gm_failed` 0 at /get_reward."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import httpx
import pytest

from gym_metrics import ResourcesClient, SimpleResourcesServer
from gym_metrics.integrations._client import RewardFailure
from gym_metrics.integrations.nemo_rl import GymMetricsEnvironment
from gym_metrics.integrations.trl import reward_function as trl_reward
from gym_metrics.integrations.verl import reward_function as verl_reward
from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse
from gym_metrics.nemo_gym import load_config_server
from gym_metrics.testing import serve_environment

pytestmark = pytest.mark.timeout(120)
ECHO = Path(__file__).resolve().parents[1] / "nemo_gym" / "envs" / "echo_env" / "configs" / "echo_env.yaml"
ROW = {"responses_create_params": {"input": [{"role": "user", "content": "say hi"}]}, "expected_answer": "hi"}
JUDGE_DOWN = "verify masked the rollout (mask_sample: its reward 0 is not a measurement): judge_failed: HTTP 503 from the judge"


async def test_a_judge_that_failed_fails_the_completion_at_every_door() -> None:
    """echo_env raises NeMo Gym's JudgeError on "judge down": the rollout is scored 0 and masked."""
    async with serve_environment(load_config_server(ECHO), http_port=0) as server:
        async with ResourcesClient(server.address) as client:
            [group] = await client.score_groups([(ROW, ["hi!", "judge down"])])
        assert group.rewards == [1.0, 0.0] and group.failed == [False, True]
        assert group.error_kind[1] == "verify_failed" and group.error_message[1] == JUDGE_DOWN and group.response_json[1] == ""

        prompt = "<|user|>say hi<|assistant|>"
        async with httpx.AsyncClient(timeout=30) as http:
            base = f"http://127.0.0.1:{server.http_port}"
            body = {"query": [prompt + "hi!", prompt + "judge down"], "prompts": [prompt] * 2, "labels": ["hi"] * 2}
            answer = (await http.post(f"{base}/get_reward", json=body)).json()
            plain = (await http.post(f"{base}/score_groups", json={"groups": [{"row": ROW, "completions": ["judge down"]}]})).json()
        assert answer["rewards"] == [1.0, 0.0] and answer["extra_logs"]["gm_failed"] == [0.0, 1.0] and answer["gm_errors"] == [None, JUDGE_DOWN]
        assert plain["groups"][0]["failed"] == [True] and plain["groups"][0]["error_message"] == [JUDGE_DOWN]

        def trainers() -> None:
            trl = trl_reward(server.address)
            assert trl(prompts=["say hi"] * 2, completions=["hi!", "judge down"], expected_answer=["hi"] * 2) == [1.0, None]
            with pytest.raises(RewardFailure, match="judge_failed: HTTP 503 from the judge"):
                verl_reward(server.address)("echo", "judge down", "hi", {"prompt": "say hi"})
            env = GymMetricsEnvironment({"server": server.address, "label_key": "expected_answer"})
            log = [{"role": "user", "content": "say hi"}, {"role": "assistant", "content": "judge down"}]
            with pytest.raises(RewardFailure, match="mask_sample"):
                env.step([log], [{"expected_answer": "hi"}])

        await asyncio.to_thread(trainers)


class NotFinite(SimpleResourcesServer):
    """Answers the reward its completion names ("nan", "inf", else 1)."""

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        text = body.model_dump()["response"]["output"][0]["content"][0]["text"]
        return BaseVerifyResponse(**body.model_dump(), reward={"nan": math.nan, "inf": math.inf}.get(text, 1.0))


async def test_a_reward_that_is_not_finite_fails_the_completion() -> None:
    async with serve_environment(NotFinite(), http_port=0) as server:
        async with ResourcesClient(server.address) as client:
            [group] = await client.score_groups([(ROW, ["ok", "nan", "inf"])])
        assert group.rewards == [1.0, 0.0, 0.0] and group.failed == [False, True, True]
        assert group.error_message[1:] == [f"verify answered reward {r}, not a finite number: nothing to train on" for r in ("nan", "inf")]
        async with httpx.AsyncClient(timeout=30) as http:
            body = {"query": ["Q:ok", "Q:nan"], "prompts": ["Q:"] * 2}
            answer = (await http.post(f"http://127.0.0.1:{server.http_port}/get_reward", json=body)).json()
        assert answer["rewards"] == [1.0, 0.0] and answer["extra_logs"]["gm_failed"] == [0.0, 1.0]

        def verl() -> None:
            with pytest.raises(RewardFailure, match="reward nan, not a finite number"):
                verl_reward(server.address)("x", "nan", None, {"prompt": "q"})

        await asyncio.to_thread(verl)
