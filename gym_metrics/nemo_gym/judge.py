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
    """`verify` as it is: gym-metrics applies the judge failsafe to every ported verify itself
    (SimpleResourcesServer.run_verify), so an environment that wraps its own keeps one."""

    @functools.wraps(verify)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        return await verify(*args, **kwargs)

    return wrapper


__all__ = ["JudgeError", "call_judge", "judge_failsafe", "reraise_judge_errors"]
