"""The multi-turn agent loop, as NeMo Gym's `simple_agent` runs it: call the policy with the
tools, run each `function_call` against the environment, append the `function_call_output`s,
and call again, until the policy answers without calls (or `max_steps`: the episode is then
verified as it stands, its response as NeMo Gym's; `EpisodeResult.stop` says why it stopped).

The episode's answer is the trajectory in Responses API shape: the last policy answer with
`output` replaced by every output item of every turn (function calls, their outputs, messages,
reasoning, in order) and `usage` summed over the turns, so verify, token statistics and
economics see the whole episode. The tool calls of one turn run one after another in the order
the policy made them, as NeMo Gym runs them (a later call sees what an earlier one did);
`parallel_tool_calls=True` runs them concurrently instead (faster for independent calls, not
NeMo Gym's program). Either way their outputs are appended in the policy's order. Arguments
that are not JSON get NeMo Gym's error output without a call; the others are sent as NeMo Gym's
agent sends them (`posted_arguments`).

Without `call_tool` the episode is NeMo Gym's tool_simulation_agent's and
non_executing_simple_agent's: one policy call, whose answer is the rollout, its calls never run.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Optional, TypeGuard

import orjson

from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.recording import EpisodeTrace
from gym_metrics.targets import ModelTarget, chat_request_to_responses

ONE_CALL_AGENTS = frozenset({"tool_simulation_agent", "non_executing_simple_agent"})
"""NeMo Gym agents that make one policy call and verify its answer, running none of its tool
calls (a model simulates the tools elsewhere, or the call is the answer): run with no `call_tool`."""

SEEDING_AGENTS = frozenset({"non_executing_simple_agent"})
"""The one-call agents that seed a session first and verify in it (its resources server's
`seed_session` state is the row's); tool_simulation_agent verifies without one."""

CallTool = Callable[[str, str], Awaitable[tuple[str, bool]]]
"""(tool name, arguments JSON text; empty: no body) -> (the output the model reads, whether the
call failed)."""


@dataclass
class EpisodeResult:
    """What one finished episode gives: its trajectory and counts."""

    response: dict[str, Any]
    """The trajectory in Responses API shape (see the module docstring)."""
    steps: int
    """Policy calls made."""
    tool_calls: int
    failed_tool_calls: int
    """Calls whose output is an error (the tool raised, timed out, or the call was malformed)."""
    seconds: float
    stop: str = "answered"
    """Why the loop stopped: `answered` (a turn without calls), `incomplete` (the policy said
    so), `max_steps` (the bound, with calls still to answer; collect writes it on the row as
    `_gm_stop_reason`, the response staying NeMo Gym's)."""


async def run_episode(
    target: ModelTarget,
    request: Mapping[str, Any],
    call_tool: CallTool | None,
    *,
    max_steps: Optional[int] = None,
    parallel_tool_calls: bool = False,
    trace: Optional[EpisodeTrace] = None,
) -> EpisodeResult:
    """Run one episode of `request` (a Responses API request: `input`, `tools`, ...; a chat
    one, `messages`, is converted first); the policy's GenerationError propagates (the
    rollout failed). `trace`: record the turns and tool calls for the trajectory."""
    start = time.perf_counter()
    body = chat_request_to_responses(request) if "messages" in request else dict(request)
    given = body.get("input", [])
    prompt: list[Any] = [{"role": "user", "content": given}] if isinstance(given, str) else list(given)
    outputs: list[dict[str, Any]] = []
    usage: Optional[dict[str, Any]] = None
    steps = calls_made = failed = 0
    stop = "answered"
    while True:
        steps += 1
        answer, items = await ask(target, body, [*prompt, *outputs], trace)
        outputs.extend(items)
        usage = add_usage(usage, answer.get("usage"))
        if answer.get("incomplete_details"):
            stop = "incomplete"
            break
        if call_tool is None:  # one call, its calls the answer (module docstring)
            break
        calls = [i for i in items if i.get("type") == "function_call"]
        if not calls:
            if not any(i.get("type") == "message" and i.get("role", "assistant") == "assistant" for i in items):
                answer = _no_answer(answer, bool(items))
            break
        if parallel_tool_calls:
            results = await asyncio.gather(*(_call(call, call_tool, trace) for call in calls))
        else:
            results = [await _call(call, call_tool, trace) for call in calls]
        for call, (output, call_failed) in zip(calls, results):
            outputs.append({"type": "function_call_output", "call_id": call.get("call_id"), "output": output})
            failed += call_failed
        calls_made += len(calls)
        if max_steps and steps >= max_steps:  # NeMo Gym's simple_agent: the invocation is incomplete
            stop = "max_steps"
            break
    response = {**answer, "output": outputs, "usage": usage}
    if trace is not None:
        trace.conversation = [*prompt, *outputs]
        trace.status = "completed" if stop == "answered" and answer.get("status") != "incomplete" else "incomplete"
    return EpisodeResult(response, steps, calls_made, failed, time.perf_counter() - start, stop)


async def ask(target: ModelTarget, body: Mapping[str, Any], question: list[Any], trace: Optional[EpisodeTrace]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One policy turn: its answer and the answer's output items (the turn traced)."""
    asked_at = time.time()
    answer = (await target.generate({**body, "input": question})).response
    items = [i for i in answer.get("output") or () if isinstance(i, dict)]
    if trace is not None:
        trace.turn(question, items, asked_at)
    return answer, items


async def _call(call: Mapping[str, Any], call_tool: CallTool, trace: Optional[EpisodeTrace] = None) -> tuple[str, bool]:
    started_at, start = time.time(), time.perf_counter()
    name = str(call.get("name"))
    try:
        body = posted_arguments(call.get("arguments"))
    except Unreadable as bad:  # NeMo Gym's output for it, word for word
        output, failed = json.dumps({"error": f"Invalid tool call arguments: {bad.args[0]!r}"}), True
    except TypeError as error:  # NeMo Gym's agent fails its /run, and the rollout with it
        raise InvalidInputError("a tool call NeMo Gym's agent cannot send", [FieldViolation(f"call {name}: arguments", f"{error} (orjson, as NeMo Gym encodes them)")]) from None
    else:
        output, failed = await call_tool(name, body)
    if trace is not None:
        trace.tool(call.get("call_id"), call.get("name"), started_at, time.perf_counter() - start, failed, output)
    return output, failed


_LONG_NUMBER = re.compile(r"\d{19}")
"""An integer orjson may read as a float (past 64 bits), where NeMo Gym's json.loads keeps it."""


class Unreadable(Exception):
    """Arguments `json.loads` refuses; args[0] is its exception, which NeMo Gym shows the model."""


def posted_arguments(arguments: Any) -> str:
    """The body NeMo Gym's simple_agent posts for a call's arguments: parsed by `json.loads`
    (Unreadable: it refused them), then sent as its `server_utils.request`
    sends them: a truthy value encoded by orjson (NaN and infinities become null; an integer
    past 64 bits raises TypeError: the run fails there), null as no body (""), any other falsy
    value as `json.dumps` writes it. orjson parses first, json only what orjson cannot read
    as json does (NaN, long integers, lone surrogates)."""
    value: Any
    try:
        if not isinstance(arguments, (str, bytes)) or _LONG_NUMBER.search(str(arguments)):
            raise orjson.JSONDecodeError("", "", 0)
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        try:
            value = json.loads(arguments)
        except (json.JSONDecodeError, TypeError) as exc:  # what simple_agent catches
            raise Unreadable(exc) from None
    if value is None:
        return ""
    return orjson.dumps(value).decode() if value else json.dumps(value)


def _no_answer(answer: dict[str, Any], had_output: bool) -> dict[str, Any]:
    """A turn with neither a message nor a call: the episode ends incomplete, as NeMo Gym
    marks it (a stop without an answer: a model or inference-engine problem)."""
    reason = "incomplete_reasoning" if had_output else "empty_output"
    message = (  # NeMo Gym's words: rows compare equal
        "Ending trajectory: model returned no assistant message or tool calls "
        "(reasoning-only or empty output) without reported truncation. "
        "This is the stop-token case (finish_reason='stop'), not length truncation "
        "(finish_reason='length', handled separately via incomplete_details). "
        "This indicates either a badly trained model requiring training-level fixes "
        "or a bug in the inference engine."
    )
    metadata = {**(answer.get("metadata") or {}), "ng_termination_reason": reason, "ng_termination_message": message}
    return {**answer, "status": "incomplete", "metadata": metadata}


def add_usage(total: Optional[dict[str, Any]], more: Any) -> Optional[dict[str, Any]]:
    """Token counts summed over turns, details (cached, reasoning tokens) included."""
    if not _is_mapping(more):
        return total
    if total is None:  # the details copied too, counts sent as digits read as numbers
        return {k: v if type(v) is int else dict(v) if _is_mapping(v) else _as_number(v) for k, v in more.items()}
    out = dict(total)
    for key in ("input_tokens", "output_tokens", "total_tokens"):
        mine, theirs = out.get(key), more.get(key)
        out[key] = mine + theirs if type(mine) is int and type(theirs) is int else (_count(mine) or 0) + (_count(theirs) or 0)
    for details, key in (("input_tokens_details", "cached_tokens"), ("output_tokens_details", "reasoning_tokens")):
        mine, theirs = out.get(details), more.get(details)
        if _is_mapping(mine) and _is_mapping(theirs):
            a, b = mine.get(key), theirs.get(key)
            if type(a) is not int or type(b) is not int:
                a, b = _count(a), _count(b)
            out[details] = {**mine, key: None if a is None or b is None else a + b}  # an unknown count stays unknown
    return out


def _is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    return type(value) is dict or isinstance(value, Mapping)  # (parsed JSON's are dicts: no ABC check)


def _as_number(value: Any) -> Any:
    """Digits sent as text as their number (as NeMo Gym's pydantic usage model reads them)."""
    return int(value) if isinstance(value, str) and value.strip().isdigit() else value


def _count(value: Any) -> int | float | None:
    """A token count as a policy may send it; anything but a number or digits is unknown (a
    policy's "10" beside a 10 stopped the whole run with a TypeError)."""
    value = _as_number(value)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
