"""NeMo Gym's own aggregation answer, ported: `compute_aggregate_metrics` (and the resources
server's `aggregate_metrics` given an AggregateMetricsRequest, as environments' tests call it)
and `RewardProfiler().rollout_info_from_result` give what NeMo Gym 0.7.0 gave for the same rows
and hooks (tests/data/nemo_gym_aggregate/answers.json, recorded by
scripts/make_nemo_aggregate_answer_reference.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.nemo_gym.base_resources_server import BaseResourcesServerConfig, SimpleResourcesServer
from gym_metrics.nemo_gym.config_types import AggregateMetricsRequest
from gym_metrics.nemo_gym.reward_profile import AggregateMetricsMixin, RewardProfiler, compute_aggregate_metrics

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import make_nemo_aggregate_answer_reference as reference  # noqa: E402

RECORDED = json.loads((Path(__file__).resolve().parents[1] / "data" / "nemo_gym_aggregate" / "answers.json").read_text())
OURS = reference.record(compute_aggregate_metrics, RewardProfiler())


@pytest.mark.parametrize("name", sorted(RECORDED["answers"]))
def test_the_answer_is_nemo_gym_s(name: str) -> None:
    assert OURS["answers"][name] == RECORDED["answers"][name]


def test_rollout_infos_are_nemo_gym_s() -> None:
    assert OURS["rollout_infos"] == RECORDED["rollout_infos"]
    with pytest.raises(KeyError):  # NeMo Gym's needs both indices
        RewardProfiler().rollout_info_from_result({"reward": 1.0})


class _Hooked(SimpleResourcesServer):
    async def verify(self, body: Any) -> Any:  # never called here
        raise NotImplementedError

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return reference.custom_metrics(tasks)

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        return reference.key_metrics(agent_metrics)

    def compute_repeat_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return reference.repeat_metrics(tasks)


@pytest.mark.parametrize("name", sorted(reference.CASES))
async def test_the_server_s_aggregate_metrics_answers_a_nemo_request_as_nemo_gym_s(name: str) -> None:
    server = _Hooked(config=BaseResourcesServerConfig(host="127.0.0.1", port=0, entrypoint="", name="hooked"))
    answer = await server.aggregate_metrics(AggregateMetricsRequest(verify_responses=reference.CASES[name]))
    assert answer.model_dump(mode="json") == RECORDED["answers"][f"{name}, with hooks"]


def test_the_mixin_s_default_repeat_hook_counts_as_none() -> None:
    rows = reference.CASES["rewards, an answer and a bool over 3 tasks x 2 repeats"]
    with_default = compute_aggregate_metrics(rows, compute_repeat_metrics_fn=AggregateMetricsMixin().compute_repeat_metrics)
    assert with_default.model_dump(mode="json") == RECORDED["answers"]["rewards, an answer and a bool over 3 tasks x 2 repeats"]
