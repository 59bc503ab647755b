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
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import orjson

from gym_metrics._util.jsonio import same_json
from gym_metrics.recording._atif_items import (
    TOKEN_FIELDS,
    arguments_of,
    check_items,
    fields_known,
    item_kind,
    message_content,
    reasoning_text,
    refs_known,
    text_content,
)
from gym_metrics.recording._atif_calls import as_float, check_finish, lookup_call, model_call, step_metrics
from gym_metrics.recording._atif_json import AtifRefused, check_json, pruned, same_copy
from gym_metrics.recording._atif_shapes import check_shapes, roleless_answers_read, with_default_status
from gym_metrics.recording._trajectory_schema import trajectory_error

ATIF_SCHEMA_VERSION = "ATIF-v1.7"
PROFILE = "ng-trajectory-to-atif-v1"
_TOOL_EXTRA = ("sandbox_id", "started_at", "completed_at", "duration_ms", "timing_source")


@dataclass
class _AgentStep:
    """One agent step being built: what the model saw, what it answered, its ATIF step."""

    question: list[Any]
    reasoning: list[Any]
    answer: list[Any]
    step: dict[str, Any]
    tokens: dict[str, Any] = field(default_factory=dict)


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
        kind = item_kind(item)
        if kind in ("input", "copied"):
            if item.get("role") == "developer":
                raise AtifRefused(f"{path}.role", "developer messages are not supported")
            if kind == "copied":
                raise AtifRefused(f"{path}.role", "copied assistant context is not supported")
            if turns:
                raise AtifRefused(path, "later system or user turns are not supported")
            steps.append({"step_id": len(steps) + 1, "source": item.get("role"), "message": message_content(item, path, False)})
            seen.append(item)
            at += 1
            continue
        question, reasoning, answer = list(seen), [], []
        while at < len(conversation) and item_kind(conversation[at]) == "reasoning":
            reasoning.append(conversation[at])
            at += 1
        if at >= len(conversation):
            raise AtifRefused(path, "reasoning is not followed by an agent answer")
        calls = []
        while at < len(conversation) and item_kind(conversation[at]) == "function_call":
            call, where = conversation[at], f"ng_trajectory.invocations[0].conversation[{at}]"
            for key in ("call_id", "name"):
                if not isinstance(call.get(key), str):
                    raise AtifRefused(f"{where}.{key}", "expected a string")
                if not call[key].strip():
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
            while at < len(conversation) and item_kind(conversation[at]) == "function_call_output":
                output = conversation[at]
                if not isinstance(output.get("call_id"), str):
                    raise AtifRefused(f"ng_trajectory.invocations[0].conversation[{at}].call_id", "expected a string")
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
                content = text_content(outputs[call_id].get("output"), f"{path}.tool_results[{call_id!r}].output")
                # compared as written (nulls too): the conversation's output is already exactly its shape
                if record.get("output") is not None and not same_json(record["output"], outputs[call_id].get("output")):
                    raise AtifRefused(path, f"tool execution {call_id!r} has a different recorded output")
                extra = {k: as_float(k, record[k]) for k in _TOOL_EXTRA if record.get(k) is not None}
                results[call_id] = (content, extra)
                tool_calls.append({"tool_call_id": call_id, "function_name": call["name"], "arguments": arguments_of(call, f"{path}.tool_calls[{n}]"),
                                   **({"extra": {"nemo_gym": {"source_item_id": call["id"]}}} if call.get("id") is not None else {})})  # fmt: skip
            observed = []
            for call_id, output in outputs.items():
                content, extra = results[call_id]
                if output.get("id") is not None:
                    extra["source_item_id"] = output["id"]
                observed.append({"source_call_id": call_id, "content": content, **({"extra": {"nemo_gym": extra}} if extra else {})})
            step.update(message="", reasoning_content=reasoning_text(reasoning, f"{path}.reasoning"), tool_calls=tool_calls,
                        observation={"results": observed})  # fmt: skip
            seen.extend([*reasoning, *calls, *outputs.values()])
        elif item_kind(conversation[at]) == "assistant":
            message = conversation[at]
            answer.append(message)
            seen.extend([*reasoning, message])
            at += 1
            step.update(message=message_content(message, path, True), reasoning_content=reasoning_text(reasoning, f"{path}.reasoning"))
        else:
            raise AtifRefused(path, f"unsupported conversation item {_named(conversation[at])}")
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


def _named(item: Mapping[str, Any]) -> str:
    """An item out of place as a refusal names it: its type, or for a message what it is."""
    kind = item_kind(item)
    if kind == "input":
        return f"{item.get('role')!r} message (later system or user turns are not supported)"
    if kind == "copied":
        return "'assistant' message that is no answer (copied assistant context is not supported)"
    return repr(kind)


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
            check_shapes(turn.get(name), f"{path}.{name}", copy=True)
            if not same_copy(with_default_status(turn.get(name)), with_default_status(mine)):
                what = {"question": "the model-visible conversation prefix", "answer": "the exported agent answer"}.get(name, "the exported reasoning")
                raise AtifRefused(f"{path}.{name}", f"does not match {what}")
        tools_so_far += len(step.get("tool_calls") or ())
        if turn.get("step_count") != tools_so_far:
            raise AtifRefused(f"{path}.step_count", "does not match the cumulative tool-call count")
        refs = turn.get("model_calls") or []
        if len(refs) != 1:
            raise AtifRefused(f"{path}.model_calls", "expected exactly one captured model call")
        index = lookup_call(refs[0], calls, f"{path}.model_calls[0]")
        if index in used:
            raise AtifRefused(f"{path}.model_calls[0]", "model call is referenced by more than one turn")
        used.add(index)
        call = model_call(calls[index])
        metadata = call["response_metadata"]
        if metadata.get("response_status") not in (None, "completed"):
            raise AtifRefused(path, f"model call is {metadata['response_status']!r}, not completed")
        if metadata.get("error_category") is not None:
            raise AtifRefused(path, "model call contains provider error evidence")
        if metadata.get("status_code") is not None and not 200 <= metadata["status_code"] < 300:
            raise AtifRefused(path, f"model call returned non-success status {metadata['status_code']}")
        if metadata.get("model") is not None and not metadata["model"].strip():
            raise AtifRefused(f"{path}.model_calls[0].model", "cannot be blank")
        check_finish(metadata.get("finish_reason"), metadata.get("dialect"), bool(step.get("tool_calls")), path)
        try:
            stamp = datetime.fromtimestamp(turn["timestamp"], timezone.utc).isoformat().replace("+00:00", "Z")
        except (KeyError, TypeError, OverflowError, OSError, ValueError):
            raise AtifRefused(f"{path}.timestamp", "cannot be represented as an ISO 8601 timestamp") from None
        metrics = step_metrics(call["token_stats"], path)
        if built.tokens:  # lenient only: the strict profile refused the row's token fields
            metrics = {**(metrics or {}), "prompt_token_ids": built.tokens.get("prompt_token_ids"),
                       "completion_token_ids": built.tokens.get("generation_token_ids"), "logprobs": built.tokens.get("generation_log_probs")}  # fmt: skip
            metrics = {k: metrics[k] for k in ("prompt_tokens", "completion_tokens", "cached_tokens", "prompt_token_ids",
                                               "completion_token_ids", "logprobs", "extra") if metrics.get(k) is not None}  # fmt: skip
        sources: dict[str, Any] = {}
        if built.reasoning:
            sources["reasoning_ids"] = [r.get("id") for r in built.reasoning]
        if len(built.answer) == 1 and item_kind(built.answer[0]) == "assistant":
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
    indices = [lookup_call(ref, calls, f"ng_trajectory.invocations[0].model_calls[{i}]") for i, ref in enumerate(refs)]
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
    `strict_json_loads`, so it holds JSON values only, no NaN (but maybe a string or key with
    an unpaired surrogate, which a JSON escape can write and NeMo Gym refuses)."""
    for name, value in (("session_id", session_id), ("agent_version", agent_version)):
        if not isinstance(value, str) or not value.strip():
            raise AtifRefused(name, "expected a non-empty string")
    try:  # a JSON value throughout, checked fast (orjson: keys, types, surrogates; json, unless parsed: NaN); the walk names what is not
        orjson.dumps(row)
        if not parsed:
            json.dumps(row, allow_nan=False)
    except (TypeError, ValueError):
        check_json(row, "rollout")
    trajectory = row.get("ng_trajectory")
    if not isinstance(trajectory, dict) or trajectory_error(trajectory, strict=True) is not None:
        raise AtifRefused("ng_trajectory", "missing or invalid v1.0 trajectory")
    for i, invocation in enumerate(trajectory.get("invocations") or []):
        check_items(invocation.get("conversation"), f"ng_trajectory.invocations[{i}].conversation", lenient)
        refs_known(invocation.get("model_calls"), f"ng_trajectory.invocations[{i}].model_calls")
    for i, turn in enumerate(trajectory.get("turns") or []):
        for name in ("question", "answer", "reasoning_content"):
            check_items(turn.get(name), f"ng_trajectory.turns[{i}].{name}", lenient)
        refs_known(turn.get("model_calls"), f"ng_trajectory.turns[{i}].model_calls")
    trajectory = roleless_answers_read(trajectory)
    for i, invocation in enumerate(trajectory.get("invocations") or []):  # as NeMo Gym's typed items validate them
        check_shapes(invocation.get("conversation"), f"ng_trajectory.invocations[{i}].conversation")
    for i, call in enumerate(trajectory.get("model_calls") or []):
        refs_known([call.get("response_metadata") or {}], f"ng_trajectory.model_calls[{i}].response_metadata", index=False)
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
    if ref and not isinstance(ref, dict):  # NeMo Gym crashes on it; one that is empty ("", 0, false, []) is no agent_ref to it
        raise AtifRefused("agent_ref", f"expected an object, got {type(ref).__name__}")
    if isinstance(ref, dict):
        fields_known(ref, ("type", "name"), "agent_ref")
        if ref.get("type") not in (None, "responses_api_agents"):
            raise AtifRefused("agent_ref.type", "expected responses_api_agents when present")
    agent = agent_name(row)
    if not isinstance(agent, str) or not agent.strip():
        raise AtifRefused("agent_ref", "expected a non-empty agent_ref.name or environment server stamp")
    task_index, rollout_index = _index(row, "_ng_task_index"), _index(row, "_ng_rollout_index")
    steps, turns = _steps(trajectory, root, lenient)
    used = _apply_turns(trajectory, turns)
    surplus = [model_call(c) for i, c in enumerate(trajectory.get("model_calls") or []) if i not in used]
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
        extra["gym_metrics"] = {"gaps": [pruned(g) for g in gaps]}
    return {
        "schema_version": ATIF_SCHEMA_VERSION, "session_id": session_id, "trajectory_id": f"{session_id}:{task_index}:{rollout_index}",
        "agent": {"name": agent, "version": agent_version, **({"model_name": model} if model is not None else {})},
        "steps": steps, "final_metrics": {**totals, "total_steps": len(steps)}, "extra": extra,
    }  # fmt: skip


