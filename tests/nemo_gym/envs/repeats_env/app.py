"""A NeMo Gym environment in NeMo Gym's own form (the tests port it by the import rule) that
overrides compute_repeat_metrics: per repeat it returns a metric of its own (`accuracy`), one
that replaces a generic repeat-level metric (`mean/reward`, here the repeat's best reward), and
one that is not finite on one repeat (`spread`: dropped everywhere, as NeMo Gym drops it).
scripts/make_nemo_repeats_reference.py records what NeMo Gym aggregates."""

import math

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)


class RepeatsConfig(BaseResourcesServerConfig):
    pass


class RepeatsRequest(BaseVerifyRequest):
    score: float


class RepeatsResponse(BaseVerifyResponse):
    score: float


class RepeatsServer(SimpleResourcesServer):
    config: RepeatsConfig

    async def verify(self, body: RepeatsRequest) -> RepeatsResponse:
        return RepeatsResponse(**body.model_dump(), reward=float(body.score >= 0.5))

    def compute_metrics(self, tasks):
        rows = [r for task in tasks for r in task]
        return {"accuracy": sum(r["reward"] for r in rows) / len(rows)}

    def compute_repeat_metrics(self, tasks):
        rows = [r for task in tasks for r in task]
        repeat = rows[0]["_ng_rollout_index"]
        return {
            "accuracy": sum(r["reward"] for r in rows) / len(rows),
            "mean/reward": max(r["score"] for r in rows),
            "spread": math.nan if repeat == 1 else max(r["score"] for r in rows) - min(r["score"] for r in rows),
        }
