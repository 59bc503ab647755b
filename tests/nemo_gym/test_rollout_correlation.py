"""gym_metrics.nemo_gym.rollout_correlation: NeMo Gym 0.7.0's rollout ids (from a run body, in a
context variable, from a `/ng-rollout/<id>/` path prefix)."""

from __future__ import annotations

from typing import Any

import pytest

from gym_metrics.nemo_gym.base_resources_server import BaseRunRequest
from gym_metrics.nemo_gym.global_config import ROLLOUT_ID_KEY_NAME, TASK_INDEX_KEY_NAME
from gym_metrics.nemo_gym.rollout_correlation import (
    RolloutContextMiddleware,
    current_rollout_id,
    maybe_rollout_id_from_run_body,
    rollout_context,
)


def test_the_id_a_run_body_names() -> None:
    assert maybe_rollout_id_from_run_body({"_ng_task_index": 3, "_ng_rollout_index": 1}) == "3-1"
    assert maybe_rollout_id_from_run_body({"_ng_task_index": 3, "_ng_rollout_index": 1, "_ng_attempt_index": 2}) == "3-1-a2"
    assert maybe_rollout_id_from_run_body({"_ng_task_index": 3, "_ng_rollout_index": 1, "_ng_attempt_index": 0}) == "3-1"
    assert maybe_rollout_id_from_run_body({"_ng_rollout_id": "run.7", "_ng_task_index": 3, "_ng_rollout_index": 1}) == "run.7"
    assert maybe_rollout_id_from_run_body({TASK_INDEX_KEY_NAME: 3}) is None
    assert maybe_rollout_id_from_run_body(None) is None
    with pytest.raises(ValueError, match=ROLLOUT_ID_KEY_NAME):
        maybe_rollout_id_from_run_body({"_ng_rollout_id": ".hidden"})


def test_a_run_request_model_gives_its_capture_id() -> None:
    body = BaseRunRequest.model_validate({"responses_create_params": {"input": "hi"}, "_ng_rollout_id": "r-1"})
    assert maybe_rollout_id_from_run_body(body) == "r-1"


def test_the_context_is_restored_after_the_block() -> None:
    assert current_rollout_id() is None
    with rollout_context("a"):
        with rollout_context("b"):
            assert current_rollout_id() == "b"
        assert current_rollout_id() == "a"
    assert current_rollout_id() is None


async def test_the_middleware_strips_the_prefix_inside_the_context() -> None:
    seen: list[tuple[Any, Any, Any]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append((scope["path"], scope.get("raw_path"), current_rollout_id()))

    middleware = RolloutContextMiddleware(app)
    await middleware({"type": "http", "path": "/ng-rollout/7-2/verify"}, None, None)
    await middleware({"type": "http", "path": "/verify"}, None, None)
    await middleware({"type": "http", "path": "/ng-rollout/.bad/verify"}, None, None)
    await middleware({"type": "websocket", "path": "/ng-rollout/7-2/verify"}, None, None)
    assert seen == [
        ("/verify", b"/verify", "7-2"),
        ("/verify", None, None),
        ("/ng-rollout/.bad/verify", None, None),
        ("/ng-rollout/7-2/verify", None, None),
    ]
    assert current_rollout_id() is None
