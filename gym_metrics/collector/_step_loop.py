"""The episode loop of an environment that answers each turn (reset / step), as NeMo Gym's
`gymnasium_agent` runs it: the task row's prompt (with reset's observation appended as a user
message), then per turn: call the policy, step the environment with its answer, add the
environment's `info["tool_outputs"]` as function_call_output items and its observation as the
next user message; stop when a step terminates or truncates the episode, or after `max_steps`
turns (then the episode counts as truncated). The reward is the sum of the steps' rewards.

The row written is NeMo Gym 0.7.0's run response: `responses_create_params` (with the reset's
observation), `response` (the last policy answer with `output` replaced by every item of
every turn, observations included, and `usage` summed), `reward`, `mask_sample`,
`failure_kind`, `failure_reason` (False, None, None: a finished episode is a measurement),
`terminated`, `truncated`, and the last step's `info`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Optional

from gym_metrics.collector._agent_loop import add_usage, ask
from gym_metrics.recording import EpisodeTrace
from gym_metrics.targets import ModelTarget, chat_request_to_responses

DEFAULT_MAX_STEPS = 10
"""Turns of one episode when `--max-steps` is not given (NeMo Gym's gymnasium_agent default)."""

Step = Callable[[dict[str, Any]], Awaitable[Mapping[str, Any]]]
"""The model's turn (a Responses API object) -> the environment's answer (observation, reward,
terminated, truncated, info)."""


@dataclass
class StepEpisode:
    """One finished episode: the row to write and its counts."""

    row: dict[str, Any]
    reward: float
    steps: int
    seconds: float


def _user(text: str) -> dict[str, Any]:
    return {"content": text, "role": "user", "type": "message"}  # NeMo Gym's easy input message, in its key order


async def run_step_episode(
    target: ModelTarget,
    request: Mapping[str, Any],
    reset: Mapping[str, Any],
    step: Step,
    *,
    max_steps: Optional[int] = None,
    trace: Optional[EpisodeTrace] = None,
) -> StepEpisode:
    """Run one episode (see the module docstring); the policy's GenerationError propagates."""
    start = time.perf_counter()
    body = chat_request_to_responses(request) if "messages" in request else dict(request)
    given = body.get("input", [])
    prompt: list[Any] = [_user(given)] if isinstance(given, str) else list(given)
    if reset.get("observation"):
        prompt.append(_user(str(reset["observation"])))
    outputs: list[Any] = []
    usage: Optional[dict[str, Any]] = None
    total, turns, answer = 0.0, 0, None
    last: Mapping[str, Any] = {"observation": None, "reward": 0.0, "terminated": False, "truncated": True, "info": {}}
    finished = False
    for _ in range(max_steps or DEFAULT_MAX_STEPS):
        turns += 1
        answer, items = await ask(target, body, [*prompt, *outputs], trace)
        outputs.extend(items)
        usage = add_usage(usage, answer.get("usage"))
        last = await step(answer)
        total += float(last.get("reward") or 0.0)
        if last.get("terminated") or last.get("truncated"):
            finished = True
            break
        info = last.get("info") if isinstance(last.get("info"), Mapping) else {}
        for tool_output in info.get("tool_outputs", ()) if isinstance(info, Mapping) else ():
            outputs.append({"type": "function_call_output", "call_id": tool_output["call_id"], "output": tool_output["output"]})
        if last.get("observation"):
            outputs.append(_user(str(last["observation"])))
    response = {**(answer or {}), "output": outputs, "usage": usage}
    if trace is not None:
        trace.conversation = [*prompt, *outputs]
        trace.status = "completed" if finished else "incomplete"
    row = {  # NeMo Gym 0.7.0's GymnasiumRunResponse, its fields in its order
        "responses_create_params": {**body, "input": prompt}, "response": response, "reward": total,
        "mask_sample": False, "failure_kind": None, "failure_reason": None,
        "terminated": bool(last.get("terminated")), "truncated": bool(last.get("truncated")) or not finished, "info": last.get("info") or {},
    }  # fmt: skip
    return StepEpisode(row, total, turns, time.perf_counter() - start)
