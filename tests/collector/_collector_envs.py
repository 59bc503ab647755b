"""Environments of the collector tests.

Also served by subprocesses as `gym-metrics serve tests/collector/_collector_envs.py:SlowHashEnv`, so this
module imports nothing from tests/.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse
from gym_metrics.environments import SimpleResourcesServer


class CountingRequest(BaseVerifyRequest):
    answer: str = ""
    expected: str = ""


class CountingEnv(SimpleResourcesServer):
    """Reward 1.0 when `answer` equals `expected`; `answer == "boom"` raises in verify.

    Records every (task, rollout) it verified, so tests can tell what reached the server.
    """

    name = "counting_env"

    def __init__(self) -> None:
        self.calls = 0
        self.seen: list[tuple[Any, Any]] = []

    async def verify(self, body: CountingRequest) -> BaseVerifyResponse:
        self.calls += 1
        extra = body.model_extra or {}
        self.seen.append((extra.get("_ng_task_index"), extra.get("_ng_rollout_index")))
        if body.answer == "boom":
            raise RuntimeError("boom in verify")
        return BaseVerifyResponse(reward=1.0 if body.answer == body.expected else 0.0, answer_len=len(body.answer))


class HashRequest(BaseVerifyRequest):
    x: int
    """The task's number; the reward is a function of it and of the rollout index."""


def hash_reward(x: int, rollout: int) -> float:
    return ((x * 7919 + rollout * 104729) % 11) / 10.0


class SlowHashEnv(SimpleResourcesServer):
    """Deterministic and a little slow (5 ms per verify): the fault tests' environment.

    reward = hash_reward(x, rollout), capped at 1.0; tasks with x % 37 == 5 raise in verify
    for odd rollouts (recorded as failed rollouts, deterministic across runs).
    """

    name = "slow_hash"
    delay_s = 0.005

    async def verify(self, body: HashRequest) -> BaseVerifyResponse:
        await asyncio.sleep(self.delay_s)
        rollout = int((body.model_extra or {}).get("_ng_rollout_index", 0))
        if body.x % 37 == 5 and rollout % 2 == 1:
            raise ValueError(f"deterministic failure for x={body.x}")
        reward = min(hash_reward(body.x, rollout), 1.0)
        return BaseVerifyResponse(reward=reward, digits=len(str(body.x)), parity=body.x % 2 == 0)


class SlowHashMetricsEnv(SlowHashEnv):
    """SlowHashEnv with compute_metrics, so aggregation streams every row (wants_rows)."""

    name = "slow_hash_metrics"

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        solved = [any(float(r.get("reward", 0.0)) >= 1.0 for r in task) for task in tasks]
        per_task = [{"_ng_task_index": task[0]["_ng_task_index"], "solved": float(s)} for task, s in zip(tasks, solved) if task]
        return {"solved_rate": sum(solved) / len(solved) if solved else 0.0, "per_task_metrics": per_task}


class PidEnv(SimpleResourcesServer):
    """Records the pid of the worker process that verified each rollout (`worker_pid`), and
    burns `spin_us` of CPU (class attribute; 200 us by default) so verify is CPU-bound."""

    name = "pid_env"
    spin_us = 200

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        import os
        import time

        end = time.perf_counter() + self.spin_us / 1e6
        while time.perf_counter() < end:
            pass
        return BaseVerifyResponse(reward=1.0, worker_pid=os.getpid())


def _die() -> None:
    """SIGKILL this serving process: a replica lost, with nothing said to its clients."""
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


class DiesAtFirstInfoEnv(SlowHashMetricsEnv):
    """SlowHashMetricsEnv whose process dies at its `kill_at`-th GetServerInfo: the first is
    collect's environment check, right after its connection probe (a bare connect, no call)."""

    kill_at = 1
    _infos = 0

    def server_info(self) -> dict[str, Any]:
        type(self)._infos += 1
        if type(self)._infos == self.kill_at:
            _die()
        return super().server_info()


class DiesAtSecondInfoEnv(DiesAtFirstInfoEnv):
    """Dies at the second GetServerInfo: collect's worker check as it opens its connections,
    after the environment check and before any verify call."""

    kill_at = 2


class DiesAtFirstVerifyEnv(SlowHashMetricsEnv):
    """Dies at its first verify: before it answered any batch."""

    async def verify(self, body: HashRequest) -> BaseVerifyResponse:
        _die()
        return await super().verify(body)


class DiesAtAggregationEnv(SlowHashMetricsEnv):
    """Dies at its first compute_metrics: in the middle of collect's AggregateMetrics call."""

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        _die()
        return super().compute_metrics(tasks)
