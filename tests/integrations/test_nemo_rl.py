"""The NeMo RL environment against a real server (math_exact).

Call-shape tests run everywhere and call it the way NeMo RL does (NVIDIA-NeMo/RL,
`nemo_rl/experience/rollouts.py` `calculate_rewards`: each task's message logs, reduced to
`role` and `content`, and their `extra_env_info` go to `env.step.remote(messages, env_info)`,
and the answer is unpacked as the six-field `EnvironmentReturn` of
`nemo_rl/environments/interfaces.py`; `nemo_rl/environments/utils.py` `create_env` makes the
actor from its class's path with `.options(...).remote(env_config)`). The real-package tests
run NeMo RL's own `create_env` and `calculate_rewards` over Ray, and skip where NeMo RL (not on
the package index: its source) or Ray is not importable. By hand: the verl venv of
test_verl.py plus pillow wandb zmq pynvml uvicorn fastapi mlflow swanlab prometheus_client
tensorboard datasets hydra-core (then protobuf>=7.35 again), with NeMo RL's `nemo_rl/` source
on PYTHONPATH."""

from __future__ import annotations

import asyncio
import math
import pickle
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import _ci
import pytest
from _ray import local_ray

from gym_metrics.integrations import RewardFailure
from gym_metrics.integrations.nemo_rl import EnvironmentReturn, GymMetricsEnvironment
from gym_metrics.testing import serve_environment

pytestmark = pytest.mark.timeout(180)

ANSWERS = ["The answer is 4.", "5", "Answer: 4", "6"]
TRUTHS = ["4", "4", "4", "6"]
EXPECTED = [1.0, 0.0, 1.0, 1.0]


def logs() -> list[list[dict[str, Any]]]:
    """Message logs as calculate_rewards passes them (role and content only)."""
    out = []
    for answer, truth in zip(ANSWERS, TRUTHS):
        question = f"What is {int(truth) // 2}+{int(truth) // 2}?"
        out.append([{"role": "system", "content": "Be brief."}, {"role": "user", "content": question}, {"role": "assistant", "content": answer}])
    return out


def metadata() -> list[dict[str, Any]]:
    return [{"ground_truth": t, "level": 1} for t in TRUTHS]  # NeMo RL's math metadata shape


def floats(values: Any) -> list[float]:
    return [float(v) for v in values]


def test_importing_the_adaptor_imports_no_nemo_rl_ray_or_torch() -> None:
    code = "import sys, gym_metrics.integrations.nemo_rl; print(sorted({'nemo_rl', 'ray', 'torch'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


def test_the_config_needs_a_server_and_a_policy_nemo_rl_can_train_on() -> None:
    with pytest.raises(ValueError, match="server"):
        GymMetricsEnvironment({})
    with pytest.raises(ValueError, match="on_failure"):
        GymMetricsEnvironment({"server": "127.0.0.1:1", "on_failure": "none"})


def test_the_row_is_the_metadata_and_the_prompt_the_messages_before_the_answer() -> None:
    env = GymMetricsEnvironment({"server": "127.0.0.1:1"})
    row, answers = env.group(logs()[0] + [{"role": "environment", "content": "ok"}], {"ground_truth": "4", "level": 1})
    assert answers == ["The answer is 4."]
    assert row == {"level": 1, "expected_answer": "4",
                   "responses_create_params": {"input": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}]}}  # fmt: skip
    gym_row = {"responses_create_params": {"input": [{"role": "user", "content": "q"}]}, "expected_answer": "4"}
    assert env.group(logs()[0], gym_row) == (gym_row, ["The answer is 4."])  # NeMo Gym's rows go as they are


async def test_step_scores_the_batch_and_ends_every_episode() -> None:
    async with serve_environment("math_exact") as server:
        env = pickle.loads(pickle.dumps(GymMetricsEnvironment({"server": server.address})))  # Ray pickles it
        result = await asyncio.to_thread(env.step, logs(), metadata())
        _, metrics = env.global_post_process_and_metrics({"rewards": result.rewards, "is_end": [1, 1, 1, 0]})
    observations, meta, stops, rewards, terminateds, answers = result  # calculate_rewards unpacks six fields
    assert isinstance(result, EnvironmentReturn) and floats(rewards) == EXPECTED
    assert floats(terminateds) == [1.0] * 4 and stops == [None] * 4 and answers is None and meta == metadata()
    assert observations[1] == {"role": "environment", "content": "Environment: episode ended, reward 0"}
    assert metrics == {"mean_reward": 0.75, "num_samples": 4, "fraction_of_samples_properly_ended": 0.75, "gym_metrics_failed_completions": 0}


async def test_a_completion_that_cannot_be_scored_is_never_a_silent_zero() -> None:
    no_label = [{"level": 1}] * 4  # math_exact refuses a row without its label
    async with serve_environment("math_exact") as server:
        with pytest.raises(RewardFailure, match="expected_answer"):
            await asyncio.to_thread(GymMetricsEnvironment({"server": server.address}).step, logs(), no_label)
        env = GymMetricsEnvironment({"server": server.address, "on_failure": "nan"})
        result = await asyncio.to_thread(env.step, logs(), [no_label[0], *metadata()[1:]])
    assert math.isnan(float(result.rewards[0])) and floats(result.rewards[1:]) == EXPECTED[1:]
    assert result.observations[0]["content"].startswith("Environment: episode ended, not scored:")
    assert env.global_post_process_and_metrics({"rewards": [1.0]})[1]["gym_metrics_failed_completions"] == 1


async def test_logs_and_metadata_of_different_lengths_are_refused_not_scored_short() -> None:
    """Four logs with three metadata gave three rewards for four samples, without a word."""
    async with serve_environment("math_exact") as server:
        env = GymMetricsEnvironment({"server": server.address})
        with pytest.raises(ValueError, match="step got 4 message_logs but 3 metadata: one each"):
            await asyncio.to_thread(env.step, logs(), metadata()[:3])


# ----------------------------------------------------------------------------- NeMo RL itself


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    """A local Ray (2 CPUs, no dashboard) for this module; the signal handlers ray.init
    installs are restored after it, a GCS start-up timeout on a loaded machine retried once."""
    ray = _ci.need_module("ray", "the optional extra: pip install -e '.[ray]'")
    with local_ray(ray):
        yield ray


@pytest.fixture(scope="module")
def nemo_rl_and_torch() -> Any:
    """NeMo RL and torch, checked before Ray is started for nothing."""
    pytest.importorskip("nemo_rl.experience.rollouts", reason="NeMo RL is not importable (its source on PYTHONPATH)")
    torch = pytest.importorskip("torch")
    return torch


@pytest.mark.slow
async def test_nemo_rl_calculate_rewards_through_a_created_environment(nemo_rl_and_torch: Any, ray_local: Any) -> None:
    torch = nemo_rl_and_torch
    from nemo_rl.distributed.batched_data_dict import BatchedDataDict
    from nemo_rl.distributed.ray_actor_environment_registry import ACTOR_ENVIRONMENT_REGISTRY
    from nemo_rl.distributed.virtual_cluster import PY_EXECUTABLES
    from nemo_rl.environments.utils import ENV_REGISTRY, create_env, register_env
    from nemo_rl.experience.rollouts import calculate_rewards

    fqn = "gym_metrics.integrations.nemo_rl.GymMetricsEnvironmentActor"
    ACTOR_ENVIRONMENT_REGISTRY[fqn] = PY_EXECUTABLES.SYSTEM
    if "gym_metrics" not in ENV_REGISTRY:
        register_env("gym_metrics", fqn)
    async with serve_environment("math_exact") as server:
        env = create_env("gym_metrics", {"server": server.address})
        batch = BatchedDataDict({"message_log": logs(), "extra_env_info": metadata(), "task_name": ["math"] * 4})
        result = await asyncio.to_thread(calculate_rewards, batch, {"math": env})
        scored = BatchedDataDict({"rewards": result.rewards, "is_end": torch.ones(4)})
        _, metrics = await asyncio.to_thread(lambda: ray_local.get(env.global_post_process_and_metrics.remote(scored)))
    assert result.rewards.dtype == torch.float32 and result.rewards.tolist() == EXPECTED
    assert result.terminateds.tolist() == [1.0] * 4 and result.metadata == metadata()
    assert metrics["mean_reward"] == 0.75 and metrics["gym_metrics_failed_completions"] == 0


@pytest.mark.slow
async def test_the_ray_actor_class_steps_over_ray(ray_local: Any) -> None:
    from gym_metrics.integrations.nemo_rl import actor_class

    async with serve_environment("math_exact") as server:
        env = actor_class().remote({"server": server.address})
        result = await asyncio.to_thread(lambda: ray_local.get(env.step.remote(logs(), metadata())))
    assert floats(result.rewards) == EXPECTED and floats(result.terminateds) == [1.0] * 4
