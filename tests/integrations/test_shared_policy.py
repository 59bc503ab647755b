"""The pieces every trainer adaptor shares (issue 38: written once): consecutive samples of one
prompt as a group, one failure policy, and OpenRLHF's adaptor over a real environment."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from gym_metrics.environments import EnvironmentHandler, SimpleResourcesServer, score_groups
from gym_metrics.errors import InvalidInputError
from gym_metrics.integrations import RewardFailure, openrlhf, settle
from gym_metrics.integrations._mapping import consecutive_runs
from gym_metrics.integrations.verifiers import reward_function as verifiers_reward
from gym_metrics.integrations.verl import compute_score, reward_function as verl_reward
from gym_metrics.integrations.nemo_rl import GymMetricsEnvironment
from gym_metrics.integrations.trl import reward_function as trl_reward
from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse


def test_consecutive_runs_split_where_a_sample_differs_from_its_run_start() -> None:
    keys = ["a", "a", "b", "a", "a", "a"]
    assert consecutive_runs(len(keys), lambda x, y: keys[x] == keys[y]) == [(0, 2), (2, 3), (3, 6)]
    assert consecutive_runs(0, lambda x, y: True) == []


def test_settle_is_the_one_failure_policy() -> None:
    rewards, failed, errors = [1.0, 0.0, 0.5], [False, True, False], ["", "boom", ""]
    assert settle(rewards, failed, errors, "none") == [1.0, None, 0.5]
    assert settle(rewards, failed, errors, "zero") == [1.0, 0.0, 0.5]
    assert math.isnan(settle(rewards, failed, errors, "nan")[1])  # type: ignore[arg-type]
    with pytest.raises(RewardFailure, match="boom"):
        settle(rewards, failed, errors, "raise")
    marked: list[tuple[int, str]] = []

    def mark(i: int, error: str) -> bool:
        marked.append((i, error))
        return True

    assert settle(rewards, failed, errors, "error", mark) == [1.0, 0.0, 0.5]
    assert marked == [(1, "boom")]
    with pytest.raises(RewardFailure):  # nowhere to mark it: never an unmarked 0
        settle(rewards, failed, errors, "error", lambda i, e: False)


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: verl_reward("127.0.0.1:1", on_failure="none"), "verl takes 'raise', 'nan', 'zero'"),
        (lambda: verifiers_reward("127.0.0.1:1", on_failure="zero"), "verifiers takes 'error', 'nan', 'raise'"),
        (lambda: trl_reward("127.0.0.1:1", on_failure="error"), "TRL takes 'none', 'nan', 'zero', 'raise'"),
        (lambda: GymMetricsEnvironment({"server": "127.0.0.1:1", "on_failure": "none"}), "NeMo RL takes 'raise', 'nan', 'zero'"),
        (lambda: compute_score("d", "x", "1", server="127.0.0.1:1", on_failure="error"), "verl takes"),
    ],
)
def test_each_adaptor_names_the_failure_policies_its_trainer_takes(make: Any, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        make()


class Exact(SimpleResourcesServer):
    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        text = body.response["output"][0]["content"][0]["text"]
        if text == "crash":
            raise RuntimeError("the verifier crashed")
        return BaseVerifyResponse(**body.model_dump(), reward=float(text.strip() == getattr(body, "expected_answer")))


def test_openrlhf_get_reward_groups_strips_prompts_and_marks_failures() -> None:
    handler = EnvironmentHandler(Exact())
    seen: list[int] = []

    async def score(groups: Any) -> Any:
        seen.append(len(groups))
        return await score_groups(handler, groups, omit_responses=True)

    body = {"query": ["Q1 4", "Q1 5", "Q1 crash", "Q2 6"], "prompts": ["Q1 ", "Q1 ", "Q1 ", "Q2 "], "labels": ["4", "4", "4", "6"]}
    answer = asyncio.run(openrlhf.get_reward(body, score))
    assert seen == [2]  # Q1's three completions are one group, Q2's one another
    assert answer["rewards"] == answer["scores"] == [1.0, 0.0, 0.0, 1.0]
    assert answer["extra_logs"] == {"gm_failed": [0.0, 0.0, 1.0, 0.0]}
    assert answer["gm_errors"][:2] == [None, None] and "crashed" in answer["gm_errors"][2]
    with pytest.raises(InvalidInputError, match="`labels` must be a list as long as `query` \\(4\\)"):
        asyncio.run(openrlhf.get_reward({**body, "labels": ["4"]}, score))
