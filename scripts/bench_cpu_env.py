"""A CPU-bound verify environment for scripts/bench_collect.py: each verify burns a fixed
amount of this thread's CPU time (200 us by default), so verification throughput measures how
well serving uses the cores (`serve --workers N`), not the framework's own per-rollout cost.

Serve it with `gym-metrics serve scripts/bench_cpu_env.py:BurnServer --port 0 --workers 2`.
"""

from __future__ import annotations

import os
import time

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer

BURN_NS = int(float(os.environ.get("BENCH_BURN_US", "200")) * 1000)
"""CPU time each verify burns (env BENCH_BURN_US, microseconds)."""


def burn(ns: int = BURN_NS) -> int:
    """Spin until this thread has used `ns` of CPU time (not wall time: a busy machine makes
    it slower, never cheaper); returns the loop count so the work is not optimised away."""
    end = time.thread_time_ns() + ns
    spins = 0
    while time.thread_time_ns() < end:
        spins += 1
    return spins


class BurnServer(SimpleResourcesServer):
    """Reward 1.0 for every rollout, after BURN_NS of CPU."""

    name = "bench_burn"
    eager_verify = True  # pure CPU

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        return BaseVerifyResponse(reward=1.0 if burn() >= 0 else 0.0)
