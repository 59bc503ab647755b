"""What NeMo Gym's rollout collection (`nemo_gym.rollout_collection`) gives the agents that import
it: the keys a `/run` answer routes itself with (`_ng_failure_class`: to the failures sidecar;
`_ng_no_persist`: written nowhere, run again on resume; `_ng_failure_terminal`), and the
projection of a rollout's evidence into its `ng_trajectory`, as NeMo Gym's collection makes it
for every agent: the agent's own trajectory (`ng_trajectory`) and observations
(`ng_agent_observations`, joined to the captured model calls first: `merge_model_call_capture`)
and its captured model calls (`ng_model_call_capture`), one `TrajectoryRecord`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from gym_metrics.nemo_gym._environment_servers import FAILURE_CLASS, NO_RESULT_FAILURE_CLASSES
from gym_metrics.nemo_gym._resume_helpers import (
    NG_ELAPSED_KEY,
    NG_FAILURE_CLASS_KEY,
    NG_TERMINAL_KEY,
    DispatchLatencyTracker,
    get_max_rollout_attempts,
    is_terminal_failure,
    migrate_invalid_judge_main_rows,
    observed_elapsed,
)
from gym_metrics.nemo_gym.global_config import ROLLOUT_INDEX_KEY_NAME, TASK_INDEX_KEY_NAME
from gym_metrics.nemo_gym.rollout_correlation import maybe_rollout_id_from_run_body
from gym_metrics.recording import CAPTURE_KEY, OBSERVATIONS_KEY, PAYLOAD_KEYS, PERF_KEY, TRAJECTORY_KEY
from gym_metrics.nemo_gym.rollout_observability import (
    AgentInvocation,
    AgentObservationBundle,
    ModelCallRef,
    ObservationGap,
    ToolCallObservation,
    TrajectoryModelCall,
    TrajectoryRecord,
    TrajectoryToolCall,
    TrajectoryTurn,
    join_model_call_observations,
)

NG_NO_PERSIST_KEY = "_ng_no_persist"
NG_TRAJECTORY_KEY = TRAJECTORY_KEY
NG_PERF_KEY = PERF_KEY
AGENT_REQUEST_FAILED_FAILURE_CLASS = "agent_request_failed"
AGENT_RUN_ERROR_FAILURE_CLASS = "agent_run_error"
ENVIRONMENT_SERVER_FAILURE_CLASS = FAILURE_CLASS
_METADATA = ("response_id", "model_ref", "model", "dialect", "status_code", "response_status", "finish_reason", "upstream_attempted",
             "response_source", "upstream_status_code", "local_response_reason", "error_category", "latency_ttft_ms")  # fmt: skip


def trajectory_identity(row: Mapping[str, Any]) -> tuple[str, str]:
    """(task id, rollout id) of a dispatched row: its `task_id`, `problem_id` or `instance_id`,
    else its task index; its rollout id, else "{task index}-{rollout index}". As NeMo Gym's, a
    row without a task index is a KeyError even when it names its task, and one without a
    rollout index when it has no rollout id (collect gives every row both)."""
    index = str(row[TASK_INDEX_KEY_NAME])
    task = next((str(row[k]) for k in ("task_id", "problem_id", "instance_id") if row.get(k) is not None), index)
    return task, maybe_rollout_id_from_run_body(row) or f"{row[TASK_INDEX_KEY_NAME]}-{row[ROLLOUT_INDEX_KEY_NAME]}"


def merge_model_call_capture(result: dict[str, Any], capture: dict[str, Any]) -> None:
    """Put the rollout's capture block (`capture`, its calls' payloads in) on `result`, after
    joining the agent's observations to its calls (`join_model_call_observations`); a bundle that
    cannot be read is left as it is, with an `agent_observation_join_failed` gap on the block."""
    observations = result.get(OBSERVATIONS_KEY)
    if observations is not None:
        try:
            bundle = AgentObservationBundle.model_validate(observations)
            result[OBSERVATIONS_KEY] = join_model_call_observations(bundle, capture.get("calls") or ()).model_dump(mode="json")
        except Exception:  # noqa: BLE001 - NeMo Gym's rule: the rollout is kept, the failure is a gap
            capture.setdefault("gaps", []).append({"code": "agent_observation_join_failed"})
    result[CAPTURE_KEY] = capture


def attach_trajectory_record(row: Mapping[str, Any], result: dict[str, Any], *, keep_payloads: bool = False) -> None:
    """Put `ng_trajectory` on `result` (the `/run` answer of `row`); then the capture block's
    payloads, which the trajectory now holds, are dropped (kept with `keep_payloads`). A
    projection that fails is a `trajectory_projection_failed` gap on the capture block (or the
    observations, or a trajectory of that gap alone), as NeMo Gym keeps it."""
    try:
        result[NG_TRAJECTORY_KEY] = build_trajectory_record(row, result).model_dump(mode="json")
    except Exception as exc:  # noqa: BLE001 - as NeMo Gym: evidence lost, never the rollout
        result.pop(NG_TRAJECTORY_KEY, None)
        gap = {"code": "trajectory_projection_failed", "detail": type(exc).__name__}
        target = next((result[k] for k in (CAPTURE_KEY, OBSERVATIONS_KEY) if isinstance(result.get(k), dict)), None)
        if target is not None and isinstance(target.setdefault("gaps", []), list):
            target["gaps"].append(gap)
        else:
            try:
                task, rollout = trajectory_identity(row)
            except Exception:  # noqa: BLE001 - a row whose identity failed the projection: no trajectory, the answer kept (NeMo Gym logs it)
                return
            result[NG_TRAJECTORY_KEY] = TrajectoryRecord(task_id=task, rollout_id=rollout, gaps=[ObservationGap(**gap)]).model_dump(mode="json")
        return
    calls = result.get(CAPTURE_KEY, {}).get("calls") if isinstance(result.get(CAPTURE_KEY), dict) else None
    if not keep_payloads and isinstance(calls, list):
        for call in calls:
            if isinstance(call, dict):
                for key in PAYLOAD_KEYS:
                    call.pop(key, None)


def build_trajectory_record(row: Mapping[str, Any], result: Mapping[str, Any]) -> TrajectoryRecord:
    """The rollout's trajectory from what its `/run` answer (`result`) carries (module docstring)."""
    task, rollout = trajectory_identity(row)
    gaps: list[ObservationGap] = []
    invocations: list[AgentInvocation] = []
    turns: list[TrajectoryTurn] = []
    tools: list[TrajectoryToolCall] = []
    calls: list[TrajectoryModelCall] = []
    produced = False  # a producer's trajectory read (one that is not a dict, or invalid, says nothing of its turns)
    if isinstance(result.get(NG_TRAJECTORY_KEY), dict):
        try:
            own = TrajectoryRecord.model_validate(result[NG_TRAJECTORY_KEY])
        except Exception as exc:  # noqa: BLE001
            gaps.append(ObservationGap(code="producer_trajectory_invalid", detail=type(exc).__name__))
        else:
            produced = True
            wrong = [name for name, given, canonical in (("task_id", own.task_id, task), ("rollout_id", own.rollout_id, rollout)) if given != canonical]
            turns = own.turns
            if wrong:
                gaps.append(ObservationGap(code="producer_trajectory_identity_mismatch", detail=",".join(wrong)))
                turns = [t.model_copy(update={"task_id": task, "rollout_id": rollout}) for t in own.turns]
            gaps.extend(own.gaps)
            invocations, tools, calls = own.invocations, own.tool_calls, own.model_calls
    if result.get(OBSERVATIONS_KEY) is not None:
        try:
            _observed(AgentObservationBundle.model_validate(result[OBSERVATIONS_KEY]), invocations, tools, gaps)
        except Exception as exc:  # noqa: BLE001
            gaps.append(ObservationGap(code="agent_observations_invalid", detail=type(exc).__name__))
    turns.sort(key=lambda t: (t.timestamp, t.invocation_id, t.turn_no))
    capture: Mapping[str, Any] = result[CAPTURE_KEY] if isinstance(result.get(CAPTURE_KEY), dict) else {}
    _captured_calls(capture.get("calls") or (), calls)
    for gap in capture.get("gaps") or ():
        if isinstance(gap, dict):
            try:
                gaps.append(ObservationGap.model_validate(gap))
            except Exception:  # noqa: BLE001
                gaps.append(ObservationGap(code="model_call_capture_gap_invalid"))
    if not isinstance(result.get(NG_TRAJECTORY_KEY), dict):  # without its own, a turn for each call an invocation holds
        turns = _turns_of_calls(task, rollout, invocations, calls, result.get("resolved"))
    if not calls:
        gaps.append(ObservationGap(code="model_calls_unavailable"))
    if not turns and not produced:  # a producer that says "no turns" has said something
        gaps.append(ObservationGap(code="turns_unavailable"))
    if not any(i.conversation for i in invocations):
        gaps.append(ObservationGap(code="conversation_unavailable"))
    unique = {(g.code, g.invocation_id, g.detail): g for g in gaps}
    return TrajectoryRecord(task_id=task, rollout_id=rollout, invocations=invocations, turns=turns, model_calls=calls, tool_calls=tools, gaps=list(unique.values()))


def _observed(bundle: AgentObservationBundle, invocations: list[AgentInvocation], tools: list[TrajectoryToolCall], gaps: list[ObservationGap]) -> None:
    """An observation bundle into the trajectory being built: its gaps, its invocations the
    producer's trajectory lacks, its tool calls merged into those held (by invocation and call
    id; an `unknown` status does not replace a known one; the output the conversation shows)."""
    gaps.extend(bundle.gaps)
    held = {i.invocation_id for i in invocations}
    invocations.extend(r for r in bundle.records if isinstance(r, AgentInvocation) and r.invocation_id not in held)
    observed = [r for r in bundle.records if isinstance(r, ToolCallObservation)]
    if not observed:
        return
    outputs = {(i.invocation_id, item.call_id): item.output  # type: ignore[attr-defined]  # (FunctionCallOutput items: typed as dicts for mypy)
               for i in invocations for item in i.conversation if getattr(item, "type", None) == "function_call_output"}  # fmt: skip
    at = {(t.invocation_id, t.tool_call_id): n for n, t in enumerate(tools)}
    for tool in observed:
        key = (tool.invocation_id, tool.tool_call_id)
        existing = tools[at[key]] if key in at else None
        merged = existing.model_dump(mode="json") if existing is not None else {}
        update = tool.model_dump(mode="json", exclude_none=True)
        if existing is not None and tool.status == "unknown" and existing.status != "unknown":
            update.pop("status", None)
        merged.update(update)
        if key in outputs:
            merged["output"] = outputs[key]
        projected = TrajectoryToolCall.model_validate(merged)
        if key in at:
            tools[at[key]] = projected
        else:
            at[key] = len(tools)
            tools.append(projected)


def _nonnegative(value: Any) -> Optional[int]:
    return value if type(value) is int and value >= 0 else None


def _captured_calls(records: Sequence[Any], calls: list[TrajectoryModelCall]) -> None:
    """The capture's records as the trajectory's model calls: one the producer's trajectory
    names by id is completed by its record (the record's fields where it has them), the others
    added in capture order."""
    at = {c.model_call_id: n for n, c in enumerate(calls) if c.model_call_id is not None}
    for record in records:
        if not isinstance(record, dict):
            continue
        metadata = {k: record[k] for k in _METADATA if record.get(k) is not None}
        response = record.get("response")
        if isinstance(response, dict) and isinstance(response.get("status"), str):
            metadata.setdefault("response_status", response["status"])
        call = TrajectoryModelCall(
            model_call_id=record.get("model_call_id"), started_at=record.get("started_at"), completed_at=record.get("completed_at"),
            duration_ms=record.get("latency_total_ms"),
            request=record["request"] if record.get("request") is not None else record.get("request_raw"),
            response=response if response is not None else record.get("response_raw"),
            response_metadata=metadata,  # type: ignore[arg-type]
            token_stats={"prompt_tokens": _nonnegative(record.get("tokens_in")), "completion_tokens": _nonnegative(record.get("tokens_out")),  # type: ignore[arg-type]
                         "reasoning_tokens": _nonnegative(record.get("tokens_reasoning")), "total_tokens": _nonnegative(record.get("tokens_total")),
                         "cached_tokens": _nonnegative(record.get("cached_tokens"))},
        )  # fmt: skip
        call_id = record.get("model_call_id")
        n = at.pop(call_id, None) if isinstance(call_id, str) else None
        if n is None:
            calls.append(call)
            continue
        merged = calls[n].model_dump(mode="json")
        update = call.model_dump(mode="json", exclude_none=True)
        for part in ("response_metadata", "token_stats"):
            merged[part].update(update.pop(part))
        merged.update(update)
        calls[n] = TrajectoryModelCall.model_validate(merged)


def _turns_of_calls(task: str, rollout: str, invocations: Sequence[AgentInvocation], calls: Sequence[TrajectoryModelCall], resolved: Any) -> list[TrajectoryTurn]:
    """A turn for each answered model call an invocation holds (by call id, else response id;
    a call no invocation holds, a judge's, is no turn), numbered within its invocation;
    `resolved` on the last turn when it is a boolean."""
    by_call = {r.model_call_id: i.invocation_id for i in invocations for r in i.model_calls if r.model_call_id}
    by_response = {r.response_id: i.invocation_id for i in invocations for r in i.model_calls if r.response_id}
    turns: list[TrajectoryTurn] = []
    numbered: Counter[str] = Counter()
    steps: Counter[str] = Counter()
    for call in calls:
        if call.response is None:
            continue
        meta = call.response_metadata
        owner = by_call.get(call.model_call_id or "") or by_response.get(meta.response_id or "")
        if owner is None:
            continue
        question, answer, reasoning, tool_calls = _turn_content(call.request, call.response)
        numbered[owner] += 1
        turns.append(TrajectoryTurn(
            invocation_id=owner, task_id=task, rollout_id=rollout, turn_no=numbered[owner], timestamp=call.started_at or call.completed_at or 0.0,
            question=question, answer=answer, reasoning_content=reasoning, step_count=steps[owner],
            model_calls=[ModelCallRef(model_call_id=call.model_call_id, model_ref=meta.model_ref, response_id=meta.response_id)],
        ))  # fmt: skip
        steps[owner] += tool_calls
    if turns and isinstance(resolved, bool):
        turns[-1] = turns[-1].model_copy(update={"resolved": resolved})
    return turns


def _turn_content(request: Any, response: Any) -> tuple[Any, Any, Any, int]:
    """One model call as a turn's (question, answer, reasoning, tool calls made), in either
    dialect a model server captures (Responses items, a chat completion's message)."""
    question = request.get("input", request.get("messages")) if isinstance(request, dict) else request
    if isinstance(request, dict) and isinstance(request.get("input"), list):  # a message without `type` says it
        question = [{"type": "message", **i} if isinstance(i, dict) and "role" in i and "type" not in i else i for i in request["input"]]
    if isinstance(response, dict) and isinstance(response.get("output"), list):
        output = [i for i in response["output"] if isinstance(i, dict)]
        items = [i for i in output if i.get("type") != "reasoning"]
        return question, items, [i for i in output if i.get("type") == "reasoning"] or None, sum(i.get("type") == "function_call" for i in items)
    choices = response.get("choices") if isinstance(response, dict) else None
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message") or {}
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        answer = {k: v for k, v in message.items() if k not in ("reasoning_content", "reasoning")}
        return question, answer, reasoning, len(message.get("tool_calls") or [])
    return question, None, None, 0


# NeMo Gym's own names for these, which some agents import
_trajectory_identity = trajectory_identity
_build_trajectory_record = build_trajectory_record
_attach_trajectory_record = attach_trajectory_record
