"""Environments of the server-restart tests (tests/collector/test_collector_restart.py).

Served by subprocesses as `gym-metrics serve tests/collector/_restart_envs.py:<Class>`, so this module
imports nothing from tests/.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse
from gym_metrics.environments import SimpleResourcesServer


class PaddedRequest(BaseVerifyRequest):
    x: int
    """The task's number; the reward is a function of it and of the rollout index."""
    fail: bool = False
    """Raise in verify (the rollout is recorded as failed)."""


class FastHashEnv(SimpleResourcesServer):
    """Deterministic and fast: with padded rows the collector is busy writing big batches, so a
    killed server breaks calls in the middle of a write (grpc's "Internal error from Core")."""

    name = "fast_hash"

    async def verify(self, body: PaddedRequest) -> BaseVerifyResponse:
        if body.fail:
            raise ValueError(f"deterministic failure for x={body.x}")
        rollout = int((body.model_extra or {}).get("_ng_rollout_index", 0))
        return BaseVerifyResponse(reward=((body.x * 7919 + rollout * 104729) % 11) / 10.0, parity=body.x % 2 == 0)


class PacedHashEnv(FastHashEnv):
    """FastHashEnv at a slower pace: the server stops reading while its verify window is full,
    so the collector's big batches wait in HTTP/2 flow control, half written, when the
    server dies."""

    name = "paced_hash"
    delay_s = 0.02

    async def verify(self, body: PaddedRequest) -> BaseVerifyResponse:
        await asyncio.sleep(self.delay_s)
        return await super().verify(body)


class SlowAggregateEnv(FastHashEnv):
    """FastHashEnv whose compute_metrics takes a while per agent, so the aggregate phase lasts
    long enough to stop the server in the middle of it."""

    name = "slow_aggregate"
    compute_s = 0.6

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        time.sleep(self.compute_s)  # runs in a worker thread of the server
        solved = [any(float(r.get("reward", 0.0)) >= 1.0 for r in task) for task in tasks if task]
        return {"solved_rate": sum(solved) / len(solved) if solved else 0.0}


class QuickAggregateEnv(SlowAggregateEnv):
    """SlowAggregateEnv's metrics without its wait: the reference run of the SIGTERM tests."""

    compute_s = 0.0


class BrokenMetricsEnv(FastHashEnv):
    """compute_metrics raises: AggregateMetrics ends with the handler's own INTERNAL, which
    is final (never retried)."""

    name = "broken_metrics"

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        raise RuntimeError("compute_metrics is broken")
