"""Environments that answer each model turn (reset / step), as gymnasium defines them and NeMo
Gym's gymnasium servers and OpenEnv serve them: the session is reset from the task row (an
optional first observation), each model turn is an action the environment steps with, and it
answers an observation for the next turn, a reward, and whether the episode ended
(`terminated`: the game is over; `truncated`: cut short). The episode's reward is the sum of
its steps' rewards; there is no verify.

An author overrides `step` (and `reset` when the episode starts from something other than the
task row's prompt) on SimpleResourcesServer; `answers_turns` says the environment does.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pydantic_core

from gym_metrics._util.jsonio import encodes
from gym_metrics.errors import FieldViolation, InvalidInputError


@dataclass
class ResetResult:
    """What reset answers: the first observation (None: the task row's prompt is the start)
    and information the environment keeps beside it."""

    observation: str | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"observation": self.observation, "info": self.info}


@dataclass
class StepResult:
    """What one step answers, gymnasium's five: the observation the model reads next (None:
    nothing), the step's reward, whether the episode ended or was cut short, and information
    (`info["tool_outputs"]`, a list of {call_id, output}, answers the turn's function calls)."""

    observation: str | None = None
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"observation": self.observation, "reward": self.reward, "terminated": self.terminated,
                "truncated": self.truncated, "info": self.info}  # fmt: skip


def checked_reset(value: Any, where: str) -> ResetResult:
    """A reset's answer as a ResetResult: a ResetResult, an (observation, info) pair as NeMo Gym
    returns it, or None; anything else is the environment's error, named."""
    if value is None:
        return ResetResult()
    if isinstance(value, ResetResult):
        out = value
    elif isinstance(value, tuple) and len(value) == 2:
        out = ResetResult(*value)
    else:
        raise TypeError(f"{where} returned {type(value).__name__}; expected ResetResult or (observation, info)")
    out.info = _check(out.observation, out.info, where)
    return out


def checked_step(value: Any, where: str) -> StepResult:
    """A step's answer as a StepResult: a StepResult or gymnasium's 5-tuple (observation,
    reward, terminated, truncated, info); a reward that is not a finite number is an error."""
    if isinstance(value, StepResult):
        out = value
    elif isinstance(value, tuple) and len(value) == 5:
        out = StepResult(*value)
    else:
        raise TypeError(f"{where} returned {type(value).__name__}; expected StepResult or (observation, reward, terminated, truncated, info)")
    out.reward = _finite(out.reward, where)
    out.terminated, out.truncated = bool(out.terminated), bool(out.truncated)
    out.info = _check(out.observation, out.info, where)
    return out


def _finite(reward: Any, where: str) -> float:
    """A step's reward as a float: any real number (numpy's too: gymnasium types it
    SupportsFloat, NeMo Gym's pydantic model takes them), finite, not a bool or text."""
    if not isinstance(reward, (bool, str, bytes)) and hasattr(reward, "__float__"):
        with contextlib.suppress(TypeError, ValueError):
            value = float(reward)
            if math.isfinite(value):
                return value
    raise TypeError(f"{where} returned reward {reward!r}; expected a finite number")


def _check(observation: Any, info: Any, where: str) -> dict[str, Any]:
    """`info` as the answer will carry it, checked now (a failure here, not after the step was
    taken): as it is when JSON holds it (numpy's arrays too), else as FastAPI answers NeMo Gym's
    (sets as lists, models as their fields); a value neither holds is the environment's error."""
    if observation is not None and not isinstance(observation, str):
        raise TypeError(f"{where} returned observation of type {type(observation).__name__}; expected text or None")
    if not isinstance(info, Mapping):
        raise TypeError(f"{where} returned info of type {type(info).__name__}; expected a dict")
    _check_tool_outputs(info.get("tool_outputs"), where)
    if encodes(info):
        return dict(info)
    out: dict[str, Any] = {}
    for key, value in info.items():
        item: Any = {key: value}
        if not encodes(item):
            try:
                item = pydantic_core.to_jsonable_python(item)
            except (pydantic_core.PydanticSerializationError, ValueError):
                item = None
            if item is None or not encodes(item):
                raise TypeError(f"{where} returned info[{key!r}] of type {type(value).__name__}, which JSON cannot hold")
        out.update(item)
    return out


def _check_tool_outputs(outputs: Any, where: str) -> None:
    """info["tool_outputs"] as the agent loop turns each into a function_call_output (as NeMo
    Gym's gymnasium agent does): a list of {"call_id": text, "output": text}; another shape is
    the environment's error, named here (it stopped the whole collect with a KeyError)."""
    if outputs is None:
        return
    if not isinstance(outputs, (list, tuple)):
        raise TypeError(f"{where} returned info['tool_outputs'] of type {type(outputs).__name__}; expected a list")
    for i, item in enumerate(outputs):
        if not (isinstance(item, Mapping) and isinstance(item.get("call_id"), str) and isinstance(item.get("output"), str)):
            raise TypeError(f"{where} returned info['tool_outputs'][{i}] = {str(item)[:200]}; expected {{'call_id': text, 'output': text}}")


def action_of(response: Any) -> dict[str, Any]:
    """A step's action: the model's turn as a Responses API object (a JSON object with `output`)."""
    if not isinstance(response, dict) or not isinstance(response.get("output"), list):
        raise InvalidInputError("a step's action is the model's turn", [FieldViolation("response_json", "expected a Responses API object with an `output` list")])
    return response
