"""A model's turn as OpenEnv actions, and an OpenEnv observation as what the model reads next.

A turn's actions:
- each function call is one action, in order: for an MCP environment a call of one of its tools
  (`CallToolAction(tool_name, arguments)`); otherwise a call of the `step` tool whose arguments
  are the Action's fields (NeMo Gym's OpenEnv adapter offers the same tool);
- a turn without function calls is one action read from its text: a JSON object (bare or in a
  ```json fence) with the Action's fields; or, for an Action whose only field is text (OpenEnv's
  template environment: `message: str`), the text itself.
A turn that yields no action says why, and the model reads that instead of an observation.

What the model reads: the observation's own fields (not `reward`, `done`, `metadata`): the text
of the one field when it is the only one and is text, else those fields as JSON (nothing when
there are none); a tool call's
result as its text (an MCP tool's error as `Error: ...`).
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import pydantic

from gym_metrics.targets import output_text, output_tool_calls

STEP_TOOL = "step"
"""The tool a non-MCP environment's actions are called through."""
_NOT_SHOWN = {"reward", "done", "metadata"}
_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL)


@dataclass(frozen=True)
class Move:
    """One action a turn asks for: its fields (None when there is none, `error` says why), and
    the function call it came from (None: the turn's text)."""

    payload: dict[str, Any] | None
    call_id: str | None = None
    error: str | None = None


def moves_of(response: Mapping[str, Any], action: type[pydantic.BaseModel], tools: list[str] | None) -> list[Move]:
    """The actions of one turn (module docstring); `tools`: an MCP environment's tool names
    (None: not an MCP environment)."""
    calls = output_tool_calls(response)
    if calls:
        return [_call_move(call, tools) for call in calls]
    text = output_text(response)
    if tools is not None:
        return [Move(None, error=f"call one of the tools: {', '.join(tools)}")]
    return [_text_move(text, action)]


def _call_move(call: Mapping[str, Any], tools: list[str] | None) -> Move:
    name, arguments, call_id = call.get("name"), call.get("arguments"), call.get("call_id")
    if arguments in (None, ""):
        arguments = {}
    if not isinstance(arguments, dict):
        return Move(None, call_id, f"the arguments of {name!r} are not a JSON object")
    if tools is None:
        if name != STEP_TOOL:
            return Move(None, call_id, f"no tool {name!r}: call {STEP_TOOL!r} with the action's fields")
        return Move(arguments, call_id)
    if name not in tools:
        return Move(None, call_id, f"no tool {name!r}; the tools: {', '.join(tools)}")
    return Move({"type": "call_tool", "tool_name": name, "arguments": arguments}, call_id)


def _text_move(text: str, action: type[pydantic.BaseModel]) -> Move:
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    candidate = fenced.group(1).strip() if fenced else stripped
    if candidate.startswith("{"):
        try:
            parsed = orjson.loads(candidate)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            return Move(parsed)
    field = text_field(action)
    if field is not None:
        return Move({field: text})
    fields = ", ".join(shown_fields(action)) or "none"
    return Move(None, error=f"answer with a JSON object of {action.__name__}'s fields ({fields}) or call the {STEP_TOOL!r} tool")


def shown_fields(model: type[pydantic.BaseModel]) -> list[str]:
    """A model's fields besides OpenEnv's bookkeeping (`reward`, `done`, `metadata`)."""
    return [name for name in model.model_fields if name not in _NOT_SHOWN]


def text_field(action: type[pydantic.BaseModel]) -> str | None:
    """The Action's one field when it is its only one and holds text (the turn's text fills it)."""
    fields = shown_fields(action)
    if len(fields) == 1 and action.model_fields[fields[0]].annotation in (str, typing.Optional[str]):
        return fields[0]
    return None


def invalid(error: pydantic.ValidationError, action: type[pydantic.BaseModel]) -> str:
    """A refused action in a line the model can act on: each field at fault and why."""
    parts = [f"{'.'.join(str(p) for p in e['loc']) or action.__name__}: {e['msg']}" for e in error.errors()[:5]]
    return "; ".join(parts)


def observation_text(observation: Any, view: Mapping[str, Any] | None = None) -> str:
    """What the model reads of an observation (module docstring); `view`: its `client_view`,
    when made already (one dump serves both)."""
    if hasattr(observation, "tool_name") and hasattr(observation, "result"):  # an MCP tool call's
        failed = getattr(observation, "error", None)
        if failed is not None:
            return f"Error: {getattr(failed, 'message', failed)}"
        return _result_text(observation.result)
    dumped = (view or client_view(observation))["observation"]
    fields = {k: v for k, v in dumped.items() if k != "metadata"}
    if not fields:
        return ""
    if len(fields) == 1:
        (only,) = fields.values()
        if isinstance(only, str):
            return only
    return orjson.dumps(fields).decode()


def _result_text(result: Any) -> str:
    """An MCP tool's result as text: its structured value when it has one, else its text parts."""
    data = getattr(result, "data", None)
    if data is None:
        content = getattr(result, "content", None)
        if isinstance(content, list):
            return "".join(str(getattr(part, "text", "")) for part in content)
        data = result
    return data if isinstance(data, str) else orjson.dumps(data, default=str).decode()


def client_view(observation: Any) -> dict[str, Any]:
    """The observation as OpenEnv's client receives it (its server's wire form): the
    observation's fields without `reward` and `done`, and those two beside them."""
    fields = observation.model_dump(mode="json", exclude={"reward", "done"}, fallback=str)
    return {"observation": fields, "reward": observation.reward, "done": bool(observation.done)}


__all__ = ["STEP_TOOL", "Move", "client_view", "invalid", "moves_of", "observation_text", "shown_fields", "text_field"]
