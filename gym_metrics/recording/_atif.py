"""A rollout's trajectory as ATIF v1.7 (the Agent Trajectory Interchange Format), as NeMo Gym
0.7.0's `gym eval export --format atif` writes it from `ng_trajectory`.

The default profile is NeMo Gym's strict one: a row is exported only when every fact in it has
a place in ATIF, otherwise it is refused with the path of what does not fit (a gap in the
trajectory, a developer message, a failed tool call, an incomplete model answer, ...), so an
exported file never silently drops evidence. `lenient=True` accepts two things the strict
profile refuses: observation gaps (kept under `extra.gym_metrics.gaps`, the conversion marked
`partial`) and training token fields (written to ATIF's own `prompt_token_ids`,
`completion_token_ids` and `logprobs` step metrics)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import orjson

ATIF_SCHEMA_VERSION = "ATIF-v1.7"
PROFILE = "ng-trajectory-to-atif-v1"
TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs", "routed_experts")
_INCOMPLETE_FINISH = frozenset({
    "aborted", "canceled", "cancelled", "content_filter", "failed", "incomplete", "length", "max_output_tokens",
    "max_tokens", "model_context_window_exceeded", "pause_turn", "refusal", "timed_out", "timeout",
})  # fmt: skip
"""Finish reasons that say a model answer was cut short (NeMo Gym's list)."""
_ITEM_FIELDS = {
    "assistant": {"id", "content", "role", "status", "type", "phase"},
    "input": {"content", "role", "status", "type", "phase"},
    "reasoning": {"id", "summary", "type", "encrypted_content", "content"},
    "function_call": {"arguments", "call_id", "name", "type", "id", "status", "namespace"},
    "function_call_output": {"call_id", "output", "type", "id", "status"},
}
"""The fields each conversation item may carry; anything else would be dropped, so it is refused."""
_PART_FIELDS = {
    "input_text": {"type", "text"},
    "output_text": {"type", "text", "annotations", "logprobs"},
    "summary_text": {"type", "text"},
    "reasoning_text": {"type", "text"},
}
_CALL_FIELDS = ("model_call_id", "started_at", "completed_at", "duration_ms", "request", "response")
_METADATA_FIELDS = ("response_id", "model_ref", "model", "dialect", "status_code", "response_status", "finish_reason",
                    "upstream_attempted", "response_source", "upstream_status_code", "local_response_reason",
                    "error_category", "latency_ttft_ms")  # fmt: skip
_STATS_FIELDS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "total_tokens", "cached_tokens")
_FLOATS = frozenset({"started_at", "completed_at", "duration_ms", "latency_ttft_ms"})
_TOOL_EXTRA = ("sandbox_id", "started_at", "completed_at", "duration_ms", "timing_source")


class AtifRefused(ValueError):
    """A row the profile cannot represent whole; the message starts with the path of what does not fit."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = path


@dataclass
class _AgentStep:
    """One agent step being built: what the model saw, what it answered, its ATIF step."""

    question: list[Any]
    reasoning: list[Any]
    answer: list[Any]
    step: dict[str, Any]
    tokens: dict[str, Any] = field(default_factory=dict)


def strict_json_loads(text: str | bytes) -> Any:
    """JSON as RFC 8259 has it: no NaN or Infinity, no duplicate keys, no number that a float
    would change (so what is exported is what was recorded)."""

    def constant(name: str) -> Any:
        raise ValueError(f"non-JSON constant {name!r}")

    def number(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(f"JSON number {text!r} is beyond a float's range")
        if value == 0.0 and any(c in "123456789" for c in text.lower().split("e", 1)[0]):
            raise ValueError(f"JSON number {text!r} underflows a float")
        if value != 0.0 and Decimal(text) != Decimal(repr(value)):
            raise ValueError(f"JSON number {text!r} would lose precision as a float")
        return value

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ValueError(f"duplicate object key {key!r}")
            out[key] = value
        return out

    return json.loads(text, parse_constant=constant, parse_float=number, object_pairs_hook=unique)


def _same(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1, 1 is 1.0, objects compare by keys and values."""
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return a is b if a is None or b is None else (type(a) is type(b) and a == b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _pruned(value: Any) -> Any:
    """`value` without object fields that are null (how a validated copy of it dumps)."""
    if isinstance(value, dict):
        return {k: _pruned(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def _same_copy(a: Any, b: Any) -> bool:
    """Whether two copies of one record agree once their null fields are dropped; the same
    bytes (the usual case, fast) answer at once."""
    option = orjson.OPT_SORT_KEYS
    return orjson.dumps(a, option=option) == orjson.dumps(b, option=option) or _same(_pruned(a), _pruned(b))


def _check_json(value: Any, path: str) -> None:
    if value is None or isinstance(value, (bool, int, str)):
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise AtifRefused(path, "contains an unpaired Unicode surrogate and is not valid UTF-8 JSON") from None
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise AtifRefused(path, "non-finite numbers are not valid JSON")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_json(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise AtifRefused(path, "JSON object keys must be strings")
            _check_json(item, f"{path}.{key}")
    else:
        raise AtifRefused(path, f"{type(value).__name__} is not a JSON value")


def _fields_known(item: Mapping[str, Any], allowed: Iterable[str], path: str) -> None:
    unknown = sorted(repr(k) for k in item if k not in allowed)
    if unknown:
        raise AtifRefused(path, f"unsupported fields would be dropped: {', '.join(unknown)}")


def _parts_known(parts: Any, path: str) -> None:
    for i, part in enumerate(parts if isinstance(parts, list) else ()):
        if isinstance(part, dict):
            kind = part.get("type")
            if not isinstance(kind, str) or not kind.strip():
                raise AtifRefused(f"{path}[{i}].type", "expected a non-empty supported content-part type")
            if kind in _PART_FIELDS:
                _fields_known(part, _PART_FIELDS[kind], f"{path}[{i}]")


def _item_kind(item: Mapping[str, Any]) -> str:
    """assistant (a model's answer message), copied (an assistant message given as input),
    input (system, user, developer), reasoning, function_call, function_call_output."""
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        if item.get("role") == "assistant":
            return "assistant" if "id" in item else "copied"
        return "input"
    return str(kind)


def _check_items(items: Any, path: str, lenient: bool) -> None:
    """Refuses an item whose fields the export would drop (NeMo Gym's preflight)."""
    for i, item in enumerate(items if isinstance(items, list) else ()):
        where = f"{path}[{i}]"
        if not isinstance(item, dict):
            continue
        tokens = sorted(set(TOKEN_FIELDS).intersection(item))
        if tokens and not lenient:
            raise AtifRefused(where, "training token IDs, log probabilities, and routed-expert metadata are outside the "
                              f"initial ATIF export profile (found: {', '.join(tokens)})")  # fmt: skip
        kind = item.get("type")
        if not isinstance(kind, str) or not kind.strip():
            raise AtifRefused(f"{where}.type", "expected a non-empty supported conversation item type")
        if kind not in ("message", "reasoning", "function_call", "function_call_output"):
            raise AtifRefused(f"{where}.type", f"unsupported conversation item type {kind!r}")
        if kind == "message" and item.get("role") not in ("assistant", "system", "user", "developer"):
            continue
        shape = {"message": "assistant" if item.get("role") == "assistant" else "input"}.get(kind, kind)
        _fields_known(item, _ITEM_FIELDS[shape] | (set(TOKEN_FIELDS) if shape != "function_call_output" else set()), where)
        if item.get("phase") is not None:
            raise AtifRefused(f"{where}.phase", "Responses message phase is not representable in ATIF v1.7")
        if shape == "input" and "status" in item and not isinstance(item.get("content"), list):
            raise AtifRefused(f"{where}.status", "source-message status is only supported with multipart content")
        if kind == "function_call" and item.get("namespace") is not None:
            raise AtifRefused(f"{where}.namespace", "namespaced Responses function calls are not representable in ATIF v1.7")
        for key in ("content", "summary", "output"):
            _parts_known(item.get(key), f"{where}.{key}")


def _text(content: Any, path: str) -> str | list[dict[str, Any]]:
    """A message's content as ATIF content: a string, or text parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        raise AtifRefused(path, "expected non-empty scalar or multipart text content")
    parts = []
    for i, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") not in ("input_text", "output_text", "text"):
            raise AtifRefused(f"{path}[{i}]", "only text content parts are supported")
        if not isinstance(part.get("text"), str):
            raise AtifRefused(f"{path}[{i}].text", "expected a string")
        if part.get("annotations") not in (None, []) or part.get("logprobs") not in (None, []):
            raise AtifRefused(f"{path}[{i}]", "annotations and log probabilities are not representable")
        parts.append({"type": "text", "text": part["text"]})
    return parts


def _message(item: Mapping[str, Any], path: str, assistant: bool) -> str | list[dict[str, Any]]:
    if (assistant or "status" in item) and item.get("status") != "completed":
        raise AtifRefused(f"{path}.status", f"expected completed, got {item.get('status')!r}")
    if assistant and not item.get("content"):
        raise AtifRefused(f"{path}.content", "expected at least one output_text part")
    return _text(item.get("content"), f"{path}.content")


def _reasoning(items: Sequence[Mapping[str, Any]], path: str) -> str | None:
    """The reasoning before an answer as one text (ATIF has one `reasoning_content` per step)."""
    if not items:
        return None
    segments = []
    for i, item in enumerate(items):
        content, summary = item.get("content") or [], item.get("summary") or []
        if item.get("encrypted_content") is not None:
            raise AtifRefused(f"{path}[{i}]", "encrypted reasoning is not supported")
        if content and summary:
            raise AtifRefused(f"{path}[{i}]", "reasoning with both content and summary cannot be represented without dropping one")
        if not (content or summary):
            raise AtifRefused(f"{path}[{i}]", "encrypted or empty reasoning cannot be represented as ATIF text")
        for j, segment in enumerate(content or summary):
            text = segment.get("text") if isinstance(segment, dict) else None
            if not isinstance(text, str):
                raise AtifRefused(f"{path}[{i}][{j}]", "reasoning segment does not contain text")
            segments.append(text)
    if len(segments) != 1:
        raise AtifRefused(path, "multiple reasoning segments cannot be represented without changing boundaries")
    return segments[0]


def _arguments(call: Mapping[str, Any], path: str) -> dict[str, Any]:
    try:
        arguments = strict_json_loads(call.get("arguments"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise AtifRefused(f"{path}.arguments", "expected a JSON object string") from None
    if not isinstance(arguments, dict):
        raise AtifRefused(f"{path}.arguments", "expected a JSON object")
    return arguments


def _as_float(key: str, value: Any) -> Any:
    return float(value) if key in _FLOATS and isinstance(value, int) and not isinstance(value, bool) else value


def _model_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """A trajectory's model call as its validated copy dumps (declared order, nulls left out)."""
    out = {k: _as_float(k, call[k]) for k in _CALL_FIELDS if call.get(k) is not None}
    metadata = call.get("response_metadata") or {}
    out["response_metadata"] = {k: _as_float(k, metadata[k]) for k in _METADATA_FIELDS if metadata.get(k) is not None}
    if "model_ref" in out["response_metadata"]:
        ref = out["response_metadata"]["model_ref"]
        out["response_metadata"]["model_ref"] = {"type": ref.get("type"), "name": ref.get("name")}
    stats = call.get("token_stats") or {}
    out["token_stats"] = {k: stats[k] for k in _STATS_FIELDS if stats.get(k) is not None}
    return out


def _steps(trajectory: Mapping[str, Any], invocation: Mapping[str, Any], lenient: bool) -> tuple[list[dict[str, Any]], list[_AgentStep]]:
    """The conversation as ATIF steps: the system and user messages first, then one agent step
    per model answer (its reasoning, and its tool calls with their results, or its message)."""
    conversation = invocation.get("conversation") or []
    records = {r.get("tool_call_id"): r for r in trajectory.get("tool_calls") or []}
    if len(records) != len(trajectory.get("tool_calls") or []):
        raise AtifRefused("ng_trajectory.tool_calls", "tool_call_id values must be unique")
    steps: list[dict[str, Any]] = []
    turns: list[_AgentStep] = []
    seen: list[Any] = []
    used: set[str] = set()
    at = 0
    while at < len(conversation):
        item, path = conversation[at], f"ng_trajectory.invocations[0].conversation[{at}]"
        kind = _item_kind(item)
        if kind in ("input", "copied"):
            if item.get("role") == "developer":
                raise AtifRefused(f"{path}.role", "developer messages are not supported")
            if kind == "copied":
                raise AtifRefused(f"{path}.role", "copied assistant context is not supported")
            if turns:
                raise AtifRefused(path, "later system or user turns are not supported")
            steps.append({"step_id": len(steps) + 1, "source": item.get("role"), "message": _message(item, path, False)})
            seen.append(item)
            at += 1
            continue
        question, reasoning, answer = list(seen), [], []
        while at < len(conversation) and _item_kind(conversation[at]) == "reasoning":
            reasoning.append(conversation[at])
            at += 1
        if at >= len(conversation):
            raise AtifRefused(path, "reasoning is not followed by an agent answer")
        calls = []
        while at < len(conversation) and _item_kind(conversation[at]) == "function_call":
            call, where = conversation[at], f"ng_trajectory.invocations[0].conversation[{at}]"
            for key in ("call_id", "name"):
                if not str(call.get(key) or "").strip():
                    raise AtifRefused(f"{where}.{key}", "cannot be empty")
            if call.get("status") not in (None, "completed"):
                raise AtifRefused(f"{where}.status", f"expected completed, got {call.get('status')!r}")
            if call["call_id"] in used:
                raise AtifRefused(path, f"duplicate function call ID {call['call_id']!r}")
            used.add(call["call_id"])
            calls.append(call)
            at += 1
        answer.extend(calls)
        step: dict[str, Any] = {"step_id": len(steps) + 1, "source": "agent"}
        if calls:
            outputs: dict[str, Any] = {}
            while at < len(conversation) and _item_kind(conversation[at]) == "function_call_output":
                output = conversation[at]
                if output.get("call_id") in outputs:
                    raise AtifRefused(path, f"duplicate function result ID {output.get('call_id')!r}")
                if output.get("status") not in (None, "completed"):
                    raise AtifRefused(path, f"function result {output.get('call_id')!r} is {output.get('status')!r}")
                outputs[output.get("call_id")] = output
                at += 1
            expected = {c["call_id"] for c in calls}
            if set(outputs) != expected:
                raise AtifRefused(path, f"function results must match this turn's calls exactly; expected {sorted(expected)}, got {sorted(outputs)}")
            tool_calls, results = [], {}
            for n, call in enumerate(calls):
                record, call_id = records.get(call["call_id"]), call["call_id"]
                if record is None:
                    raise AtifRefused(path, f"missing tool execution record for {call_id!r}")
                if record.get("invocation_id") != invocation.get("invocation_id"):
                    raise AtifRefused(path, f"tool execution {call_id!r} belongs to another invocation")
                if record.get("status", "unknown") != "completed":
                    raise AtifRefused(path, f"tool execution {call_id!r} is {record.get('status', 'unknown')!r}, not completed")
                if record.get("error_type") is not None:
                    raise AtifRefused(path, f"completed tool execution {call_id!r} contains an error")
                if record.get("tool_name") is not None and record["tool_name"] != call["name"]:
                    raise AtifRefused(path, f"tool execution {call_id!r} has a different tool name")
                content = _text(outputs[call_id].get("output"), f"{path}.tool_results[{call_id!r}].output")
                if record.get("output") is not None and not _same_copy(record["output"], outputs[call_id].get("output")):
                    raise AtifRefused(path, f"tool execution {call_id!r} has a different recorded output")
                extra = {k: _as_float(k, record[k]) for k in _TOOL_EXTRA if record.get(k) is not None}
                results[call_id] = (content, extra)
                tool_calls.append({"tool_call_id": call_id, "function_name": call["name"], "arguments": _arguments(call, f"{path}.tool_calls[{n}]"),
                                   **({"extra": {"nemo_gym": {"source_item_id": call["id"]}}} if call.get("id") is not None else {})})  # fmt: skip
            observed = []
            for call_id, output in outputs.items():
                content, extra = results[call_id]
                if output.get("id") is not None:
                    extra["source_item_id"] = output["id"]
                observed.append({"source_call_id": call_id, "content": content, **({"extra": {"nemo_gym": extra}} if extra else {})})
            step.update(message="", reasoning_content=_reasoning(reasoning, f"{path}.reasoning"), tool_calls=tool_calls,
                        observation={"results": observed})  # fmt: skip
            seen.extend([*reasoning, *calls, *outputs.values()])
        elif _item_kind(conversation[at]) == "assistant":
            message = conversation[at]
            answer.append(message)
            seen.extend([*reasoning, message])
            at += 1
            step.update(message=_message(message, path, True), reasoning_content=_reasoning(reasoning, f"{path}.reasoning"))
        else:
            raise AtifRefused(path, f"unsupported conversation item {_item_kind(conversation[at])!r}")
        carrier = next((i for i in reversed([*reasoning, *answer]) if "generation_token_ids" in i), None)
        tokens = {k: carrier[k] for k in TOKEN_FIELDS if k in carrier} if carrier else {}
        steps.append(step)
        turns.append(_AgentStep(question, reasoning, answer, step, tokens))
    unused = set(records) - used
    if unused:
        raise AtifRefused("ng_trajectory.tool_calls", f"unreferenced tool executions: {sorted(unused)}")
    if not turns:
        raise AtifRefused("ng_trajectory.invocations[0].conversation", "contains no agent output")
    return steps, turns


def _lookup(ref: Mapping[str, Any], calls: Sequence[Mapping[str, Any]], path: str) -> int:
    """The captured model call a reference names: by id, else by (model_ref, response_id)."""
    call_id, response_id, model_ref = ref.get("model_call_id"), ref.get("response_id"), ref.get("model_ref")
    if call_id is not None and not call_id.strip():
        raise AtifRefused(f"{path}.model_call_id", "cannot be blank")
    if response_id is not None and not response_id.strip():
        raise AtifRefused(f"{path}.response_id", "cannot be blank")
    if call_id:
        found = [i for i, c in enumerate(calls) if c.get("model_call_id") == call_id]
        what = f"unknown model_call_id {call_id!r}", "model_call_id matches more than one captured model call"
    elif model_ref is not None and response_id:
        key = (model_ref.get("type"), model_ref.get("name"), response_id)
        found = [i for i, c in enumerate(calls) if (m := c.get("response_metadata") or {}).get("model_ref") is not None
                 and str(m.get("response_id") or "").strip() and (m["model_ref"].get("type"), m["model_ref"].get("name"), m["response_id"]) == key]  # fmt: skip
        what = "model_ref and response_id do not match a captured model call", "model_ref and response_id match more than one captured model call"
    else:
        raise AtifRefused(path, "model_call_id or both model_ref and response_id are required")
    if len(found) != 1:
        raise AtifRefused(path, what[0] if not found else what[1])
    index, metadata = found[0], calls[found[0]].get("response_metadata") or {}
    if response_id is not None and response_id != metadata.get("response_id"):
        raise AtifRefused(path, "response_id conflicts with the captured model call")
    if model_ref is not None and model_ref != metadata.get("model_ref"):
        raise AtifRefused(path, "model_ref conflicts with the captured model call")
    return index


def _check_finish(finish: str | None, dialect: Any, tools: bool, path: str) -> None:
    """A turn's model call must have answered in full, and its finish reason agree with its answer."""
    if finish is None:
        return
    if not finish.strip():
        raise AtifRefused(f"{path}.model_calls[0].finish_reason", "cannot be blank")
    reason = finish.strip().lower()
    if reason in _INCOMPLETE_FINISH:
        raise AtifRefused(path, f"finish reason {finish!r} indicates an incomplete model response")
    if dialect == "chat" and reason not in ({"tool_calls", "function_call"} if tools else {"stop"}):
        raise AtifRefused(path, f"Chat finish reason {finish!r} does not prove a completed response")
    if dialect == "messages" and reason not in ({"tool_use"} if tools else {"end_turn", "stop_sequence"}):
        raise AtifRefused(path, f"Messages stop reason {finish!r} does not prove a completed response")
    if tools and reason in ("stop", "end_turn", "stop_sequence"):
        raise AtifRefused(path, f"finish reason {finish!r} contradicts the captured tool calls")
    if not tools and reason in ("tool_calls", "tool_use", "function_call"):
        raise AtifRefused(path, f"finish reason {finish!r} contradicts the captured text-only output")


def _step_metrics(stats: Mapping[str, Any], path: str) -> dict[str, Any] | None:
    prompt, completion, total = stats.get("prompt_tokens"), stats.get("completion_tokens"), stats.get("total_tokens")
    cached, reasoning = stats.get("cached_tokens"), stats.get("reasoning_tokens")
    if total is not None:
        for name in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens"):
            if stats.get(name) is not None and stats[name] > total:
                raise AtifRefused(path, f"model-call {name} exceeds total_tokens")
        if prompt is not None and completion is not None and prompt + completion > total:
            raise AtifRefused(path, "model-call prompt_tokens plus completion_tokens exceeds total_tokens")
    if cached is not None and prompt is not None and cached > prompt:
        raise AtifRefused(path, "model-call cached_tokens exceeds prompt_tokens; cached tokens must be a subset")
    if reasoning is not None and completion is not None and reasoning > completion:
        raise AtifRefused(path, "model-call reasoning_tokens exceeds completion_tokens; reasoning tokens must be a subset")
    if all(stats.get(k) is None for k in _STATS_FIELDS):
        return None
    extra = {k: stats[k] for k in ("reasoning_tokens", "total_tokens") if stats.get(k) is not None}
    out = {k: v for k, v in (("prompt_tokens", prompt), ("completion_tokens", completion), ("cached_tokens", cached)) if v is not None}
    return {**out, **({"extra": extra} if extra else {})}


def _apply_turns(trajectory: Mapping[str, Any], turns: list[_AgentStep]) -> set[int]:
    """Joins each agent step to its trajectory turn and model call: timestamp, model, token
    counts and the call itself; returns the indices of the calls the turns used."""
    recorded, calls = trajectory.get("turns") or [], trajectory.get("model_calls") or []
    root = trajectory["invocations"][0]
    if len(recorded) != len(turns):
        raise AtifRefused("ng_trajectory.turns", f"expected one turn for each of {len(turns)} agent steps, got {len(recorded)}")
    used: set[int] = set()
    tools_so_far = 0
    for n, (turn, built) in enumerate(zip(recorded, turns)):
        path, step = f"ng_trajectory.turns[{n}]", built.step
        if turn.get("invocation_id") != root.get("invocation_id"):
            raise AtifRefused(f"{path}.invocation_id", "does not match the root invocation")
        if turn.get("turn_no") != n + 1:
            raise AtifRefused(f"{path}.turn_no", "turns must be ordered sequentially from 1")
        for name, mine in (("question", built.question), ("answer", built.answer), ("reasoning_content", built.reasoning or None)):
            if not _same_copy(turn.get(name), mine):
                what = {"question": "the model-visible conversation prefix", "answer": "the exported agent answer"}.get(name, "the exported reasoning")
                raise AtifRefused(f"{path}.{name}", f"does not match {what}")
        tools_so_far += len(step.get("tool_calls") or ())
        if turn.get("step_count") != tools_so_far:
            raise AtifRefused(f"{path}.step_count", "does not match the cumulative tool-call count")
        refs = turn.get("model_calls") or []
        if len(refs) != 1:
            raise AtifRefused(f"{path}.model_calls", "expected exactly one captured model call")
        index = _lookup(refs[0], calls, f"{path}.model_calls[0]")
        if index in used:
            raise AtifRefused(f"{path}.model_calls[0]", "model call is referenced by more than one turn")
        used.add(index)
        call = _model_call(calls[index])
        metadata = call["response_metadata"]
        if metadata.get("response_status") not in (None, "completed"):
            raise AtifRefused(path, f"model call is {metadata['response_status']!r}, not completed")
        if metadata.get("error_category") is not None:
            raise AtifRefused(path, "model call contains provider error evidence")
        if metadata.get("status_code") is not None and not 200 <= metadata["status_code"] < 300:
            raise AtifRefused(path, f"model call returned non-success status {metadata['status_code']}")
        if metadata.get("model") is not None and not metadata["model"].strip():
            raise AtifRefused(f"{path}.model_calls[0].model", "cannot be blank")
        _check_finish(metadata.get("finish_reason"), metadata.get("dialect"), bool(step.get("tool_calls")), path)
        try:
            stamp = datetime.fromtimestamp(turn["timestamp"], timezone.utc).isoformat().replace("+00:00", "Z")
        except (KeyError, TypeError, OverflowError, OSError, ValueError):
            raise AtifRefused(f"{path}.timestamp", "cannot be represented as an ISO 8601 timestamp") from None
        metrics = _step_metrics(call["token_stats"], path)
        if built.tokens:  # lenient only: the strict profile refused the row's token fields
            metrics = {**(metrics or {}), "prompt_token_ids": built.tokens.get("prompt_token_ids"),
                       "completion_token_ids": built.tokens.get("generation_token_ids"), "logprobs": built.tokens.get("generation_log_probs")}  # fmt: skip
            metrics = {k: metrics[k] for k in ("prompt_tokens", "completion_tokens", "cached_tokens", "prompt_token_ids",
                                               "completion_token_ids", "logprobs", "extra") if metrics.get(k) is not None}  # fmt: skip
        sources: dict[str, Any] = {}
        if built.reasoning:
            sources["reasoning_ids"] = [r.get("id") for r in built.reasoning]
        if len(built.answer) == 1 and _item_kind(built.answer[0]) == "assistant":
            sources["message_id"] = built.answer[0].get("id")
        marks = {"turn_no": turn["turn_no"], "step_count": turn["step_count"], **({"resolved": turn["resolved"]} if turn.get("resolved") is not None else {})}
        ordered = {"step_id": step["step_id"], "source": "agent", "message": step["message"], "timestamp": stamp,
                   "model_name": metadata.get("model"), "reasoning_content": step.get("reasoning_content"),
                   "tool_calls": step.get("tool_calls"), "observation": step.get("observation"), "metrics": metrics,
                   "llm_call_count": 1,
                   "extra": {"nemo_gym": {"turn": marks, "model_call": call, **({"source_items": sources} if sources else {})}}}  # fmt: skip
        step.clear()
        step.update({k: v for k, v in ordered.items() if v is not None})
    refs = root.get("model_calls") or []
    indices = [_lookup(ref, calls, f"ng_trajectory.invocations[0].model_calls[{i}]") for i, ref in enumerate(refs)]
    if len(indices) != len(set(indices)):
        raise AtifRefused("ng_trajectory.invocations[0].model_calls", "must not reference a captured model call more than once")
    missing = used - set(indices)
    if missing:
        raise AtifRefused("ng_trajectory.invocations[0].model_calls", f"must reference every turn-selected model call; missing indices: {sorted(missing)}")
    return used


def _index(row: Mapping[str, Any], key: str) -> int:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AtifRefused(key, "expected a non-negative integer")
    return value


def _identities_hold(trajectory: Mapping[str, Any]) -> bool:
    """What TrajectoryRecord itself requires: unique invocation and model-call ids, each turn of
    this task and rollout, turn numbers unique within an invocation."""
    invocations = [i.get("invocation_id") for i in trajectory.get("invocations") or []]
    call_ids = [c.get("model_call_id") for c in trajectory.get("model_calls") or [] if c.get("model_call_id")]
    turns = trajectory.get("turns") or []
    keys = [(t.get("invocation_id"), t.get("turn_no")) for t in turns]
    return (len(set(invocations)) == len(invocations) and len(set(call_ids)) == len(call_ids) and len(set(keys)) == len(keys)
            and all((t.get("task_id"), t.get("rollout_id")) == (trajectory["task_id"], trajectory["rollout_id"]) for t in turns))  # fmt: skip


def agent_name(row: Mapping[str, Any]) -> str | None:
    """The agent a rollout names (`agent_ref.name`, else the environment's stamp), as NeMo Gym labels it."""
    ref = row.get("agent_ref")
    name = ref.get("name") if isinstance(ref, dict) else None
    return name if name is not None else row.get("_ng_environment_server")


def rollout_to_atif(
    row: Mapping[str, Any], *, session_id: str, agent_version: str, exporter_version: str, lenient: bool = False, parsed: bool = False
) -> dict[str, Any]:
    """One rollout row (with `ng_trajectory`) as an ATIF v1.7 trajectory; `AtifRefused` names
    what the profile cannot represent (see the module docstring). `parsed`: the row was read by
    `strict_json_loads`, so it holds JSON values only (not checked again)."""
    for name, value in (("session_id", session_id), ("agent_version", agent_version)):
        if not isinstance(value, str) or not value.strip():
            raise AtifRefused(name, "expected a non-empty string")
    try:  # unless parsed: a JSON value throughout, checked fast (orjson: keys, types, surrogates; json: NaN); the walk names what is not
        if not parsed:
            orjson.dumps(row)
            json.dumps(row, allow_nan=False)
    except (TypeError, ValueError):
        _check_json(row, "rollout")
    trajectory = row.get("ng_trajectory")
    if not isinstance(trajectory, dict) or not isinstance(trajectory.get("task_id"), str) or not isinstance(trajectory.get("rollout_id"), str) \
            or trajectory.get("schema_version", "1.0") != "1.0":  # fmt: skip
        raise AtifRefused("ng_trajectory", "missing or invalid v1.0 trajectory")
    if not _identities_hold(trajectory):
        raise AtifRefused("ng_trajectory", "missing or invalid v1.0 trajectory")
    for i, invocation in enumerate(trajectory.get("invocations") or []):
        _check_items(invocation.get("conversation"), f"ng_trajectory.invocations[{i}].conversation", lenient)
    for i, turn in enumerate(trajectory.get("turns") or []):
        for name in ("question", "answer", "reasoning_content"):
            _check_items(turn.get(name), f"ng_trajectory.turns[{i}].{name}", lenient)
    gaps = trajectory.get("gaps") or []
    if gaps and not lenient:
        raise AtifRefused("ng_trajectory.gaps", "source coverage gaps are not supported by strict export")
    if not trajectory["task_id"].strip() or not trajectory["rollout_id"].strip():
        raise AtifRefused("ng_trajectory", "task_id and rollout_id cannot be blank")
    invocations = trajectory.get("invocations") or []
    if len(invocations) != 1:
        raise AtifRefused("ng_trajectory.invocations", "expected exactly one root invocation")
    root = invocations[0]
    if not str(root.get("invocation_id") or "").strip():
        raise AtifRefused("ng_trajectory.invocations[0].invocation_id", "cannot be blank")
    if root.get("parent_invocation_id") is not None or root.get("spawned_by_tool_call_id") is not None:
        raise AtifRefused("ng_trajectory.invocations[0]", "subagent invocations are not supported")
    if root.get("status", "unknown") != "completed":
        raise AtifRefused("ng_trajectory.invocations[0].status", f"expected completed, got {root.get('status', 'unknown')!r}")
    if root.get("error_type") is not None:
        raise AtifRefused("ng_trajectory.invocations[0].error_type", "completed invocation contains an error")
    ref = row.get("agent_ref")
    if isinstance(ref, dict):
        _fields_known(ref, ("type", "name"), "agent_ref")
        if ref.get("type") not in (None, "responses_api_agents"):
            raise AtifRefused("agent_ref.type", "expected responses_api_agents when present")
    agent = agent_name(row)
    if not isinstance(agent, str) or not agent.strip():
        raise AtifRefused("agent_ref", "expected a non-empty agent_ref.name or environment server stamp")
    task_index, rollout_index = _index(row, "_ng_task_index"), _index(row, "_ng_rollout_index")
    steps, turns = _steps(trajectory, root, lenient)
    used = _apply_turns(trajectory, turns)
    surplus = [_model_call(c) for i, c in enumerate(trajectory.get("model_calls") or []) if i not in used]
    names = [t.step.get("model_name") for t in turns]
    model = names[0] if None not in names and len(set(names)) == 1 else None
    metrics = [t.step.get("metrics") for t in turns]
    totals = {f"total_{k}": sum(m[k] for m in metrics if m) for k in ("prompt_tokens", "completion_tokens", "cached_tokens")
              if all(m is not None and m.get(k) is not None for m in metrics)}  # fmt: skip
    source = {"format": "ng_trajectory", "schema_version": trajectory.get("schema_version", "1.0"), "task_id": trajectory["task_id"],
              "rollout_id": trajectory["rollout_id"], "task_index": task_index, "rollout_index": rollout_index,
              "invocation_id": root["invocation_id"], "invocation_status": root["status"],
              **({"invocation_duration_ms": float(root["duration_ms"])} if root.get("duration_ms") is not None else {})}  # fmt: skip
    extra: dict[str, Any] = {"nemo_gym": {
        "exporter": {"name": "gym-metrics", "version": exporter_version}, "source": source,
        "conversion": {"profile": PROFILE, "status": "partial" if gaps else "complete"},
        **({"surplus_model_calls": surplus} if surplus else {}),
    }}  # fmt: skip
    if gaps:
        extra["gym_metrics"] = {"gaps": [_pruned(g) for g in gaps]}
    return {
        "schema_version": ATIF_SCHEMA_VERSION, "session_id": session_id, "trajectory_id": f"{session_id}:{task_index}:{rollout_index}",
        "agent": {"name": agent, "version": agent_version, **({"model_name": model} if model is not None else {})},
        "steps": steps, "final_metrics": {**totals, "total_steps": len(steps)}, "extra": extra,
    }  # fmt: skip


def atif_bytes(trajectory: Mapping[str, Any]) -> bytes:
    """A trajectory's file: two-space indented UTF-8 JSON and a newline, as NeMo Gym writes one."""
    return orjson.dumps(trajectory, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def read_rows(lines: Iterable[bytes]) -> Iterator[tuple[int, dict[str, Any] | AtifRefused]]:
    """(line number, row or why the line is not a row) per line of a rollouts file."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            yield number, AtifRefused(f"line {number}", "blank JSONL records are not supported")
            continue
        try:
            row = strict_json_loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            yield number, AtifRefused(f"line {number}", f"invalid JSON ({exc})")
            continue
        yield number, row if isinstance(row, dict) else AtifRefused(f"line {number}", "expected a JSON object")
