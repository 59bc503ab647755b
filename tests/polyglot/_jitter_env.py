"""math_exact whose verifies take 0-20 ms each, so VerifyStream's `answer_each` answers come in
parts, out of order, carrying their positions (a client must put each result back in its place)."""

from __future__ import annotations

import asyncio
import random

from gym_metrics_servers.math_exact import MathExactServer
from gym_metrics_servers.math_exact.app import MathVerifyRequest, MathVerifyResponse


class JitterMath(MathExactServer):
    eager_verify = False

    async def verify(self, body: MathVerifyRequest) -> MathVerifyResponse:
        await asyncio.sleep(random.random() * 0.02)
        return await super().verify(body)
