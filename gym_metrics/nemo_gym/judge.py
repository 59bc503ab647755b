"""A judge call's failure as its own outcome, not a wrong answer: `call_judge` posts to a judge
model server and parses the reply, raising JudgeError when the call fails (transport, timeout,
HTTP status); a rollout whose verify raises JudgeError is scored 0 and masked
(`failure_kind` "judge_failed"). An answer that arrives but does not parse is the environment's
to score, not a JudgeError."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from gym_metrics.nemo_gym.server_utils import ServerClient, get_response_json, raise_for_status

ResponseT = TypeVar("ResponseT", bound=BaseModel)


class JudgeError(Exception):
    """A judge call failed."""


async def reraise_judge_errors(call: Awaitable[Any]) -> Any:
    """Await a judge call; any exception it raises becomes a JudgeError (its text kept)."""
    try:
        return await call
    except JudgeError:
        raise
    except Exception as exc:
        raise JudgeError(f"{type(exc).__name__}: {exc}") from exc


async def call_judge(
    server_client: ServerClient, *, server_name: str, url_path: str, json: Any, response_model: type[ResponseT]
) -> ResponseT:
    """POST `json` to the judge `server_name` at `url_path` and parse its reply as `response_model`;
    the HTTP status is checked first, so an error answer reports the status, not a parse error."""

    async def call() -> ResponseT:
        answer = await server_client.post(server_name=server_name, url_path=url_path, json=json)
        await raise_for_status(answer)
        return response_model.model_validate(await get_response_json(answer))

    result: ResponseT = await reraise_judge_errors(call())
    return result


def judge_failsafe(verify: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """`verify` with NeMo Gym's route failsafe: a JudgeError becomes the judge-failed row (reward
    0, masked, `failure_kind` judge_failed, the request's fields kept) as a JSON answer, where
    an environment puts its own `/verify` route (litmus_agent). Its `verify` method, when
    gym-metrics calls it directly, gets the same failsafe from SimpleResourcesServer.run_verify."""

    @functools.wraps(verify)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await verify(*args, **kwargs)
        except JudgeError as exc:
            from fastapi.encoders import jsonable_encoder
            from fastapi.responses import JSONResponse

            body = kwargs.get("body") or next((a for a in (*kwargs.values(), *args) if hasattr(a, "model_dump") and hasattr(a, "response")), None)
            if body is None:
                raise RuntimeError("judge_failsafe: could not locate the verify request body") from exc
            return JSONResponse(content=jsonable_encoder(judge_failed_row(body.model_dump(), str(exc)[:2000])))

    return wrapper


def judge_failed_row(request: dict[str, Any], error: str) -> dict[str, Any]:
    """A verify request's fields with NeMo Gym's judge-failure marks: scored 0 and masked (the
    failures sidecar's row), `instance_config.mask_sample` too for older NeMo RL readers."""
    instance_config = request.get("instance_config")
    return request | {
        "reward": 0.0,
        "mask_sample": True,
        "failure_kind": "judge_failed",
        "failure_reason": error,
        "instance_config": {**(instance_config if isinstance(instance_config, dict) else {}), "mask_sample": True},
        "_ng_failure_class": "judge_failed",
        "_ng_failure_judge_error": error,
    }


__all__ = ["JudgeError", "call_judge", "judge_failed_row", "judge_failsafe", "reraise_judge_errors"]
