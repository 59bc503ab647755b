"""A scripted policy that replays recorded rollouts: each prompt gets the model turns its first
recorded rollout made, so an environment's episodes can be run again, by NeMo Gym's agent and by
`collect`, and compared turn for turn (`check-env --episodes`,
scripts/make_nemo_agent_reference.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gym_metrics.testing._policy import PolicyAnswer, prompt_of, step_of


def replayed_script(rollouts: Iterable[Mapping[str, Any]]) -> dict[str, list[PolicyAnswer]]:
    """Prompt (its last user message's text) -> one answer per step of the first rollout of
    it: a turn is the model's items up to the function call outputs after them (its message
    text and its function calls, arguments as recorded). A request that already holds tool
    turns after its prompt is asked at that step, so the steps before it are left blank."""
    script: dict[str, list[PolicyAnswer]] = {}
    for rollout in rollouts:
        request = rollout.get("responses_create_params")
        if not isinstance(request, Mapping):
            continue
        prompt = prompt_of(request)
        if prompt in script:
            continue
        turns: list[PolicyAnswer] = [PolicyAnswer() for _ in range(step_of(request))]
        turn = PolicyAnswer()
        for item in (rollout.get("response") or {}).get("output") or ():
            kind = item.get("type") if isinstance(item, Mapping) else None
            if kind == "function_call_output":
                if turn.text or turn.tool_calls:
                    turns.append(turn)
                    turn = PolicyAnswer()
            elif kind == "function_call":
                turn.tool_calls.append({"name": item.get("name"), "arguments": item.get("arguments")})
            elif kind == "message" and item.get("role", "assistant") == "assistant":
                turn.text += "".join(str(part.get("text", "")) for part in item.get("content") or () if isinstance(part, Mapping))
        if turn.text or turn.tool_calls or len(turns) == step_of(request):
            turns.append(turn)
        script[prompt] = turns
    return script


__all__ = ["replayed_script"]
