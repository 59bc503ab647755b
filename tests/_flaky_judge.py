"""An environment whose judge is down for some rows: their verify names `judge_failed` (what a
ported NeMo Gym environment's failsafe does), so collect writes them to the failures sidecar.
Rows: `flaky_rows(n)`, every fourth one with the judge down."""

from __future__ import annotations

import json
from typing import Any

from gym_metrics import BaseVerifyRequest, SimpleResourcesServer


class Request(BaseVerifyRequest):
    judge_down: bool = False


class FlakyJudge(SimpleResourcesServer):
    async def verify(self, body: Request) -> Any:
        out = {**body.model_dump(), "reward": 1.0}
        if body.judge_down:
            out.update(reward=0.0, _ng_failure_class="judge_failed", failure_reason="the judge timed out")
        return out


def flaky_rows(n: int) -> list[str]:
    return [json.dumps({"agent_ref": {"name": "a"}, "_ng_task_index": i, "_ng_rollout_index": 0, "responses_create_params": {"input": []},
                        "response": {"output": []}, "judge_down": i % 4 == 0}) for i in range(n)]  # fmt: skip
