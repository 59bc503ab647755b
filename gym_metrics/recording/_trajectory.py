"""NeMo Gym's canonical trajectory of a rollout (`ng_trajectory`, `TrajectoryRecord` schema 1.0,
`nemo_gym/rollout_observability.py`), as its simple_agent and collection build it: one
invocation (`root`) with the conversation and its model-call references, one turn per policy
call (its question, answer, reasoning, the tool calls so far), each model call with its
request, answer, metadata and token counts (from the captured records), each tool call with
its timing, status and output, and the gaps of what could not be observed."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


TRAJECTORY_KEY = "ng_trajectory"
OBSERVATIONS_KEY = "ng_agent_observations"
"""An agent's own report of what it did (NeMo Gym's AgentObservationBundle)."""
_METADATA = ("response_id", "model_ref", "model", "dialect", "status_code", "response_status", "finish_reason",
             "upstream_attempted", "response_source", "upstream_status_code", "local_response_reason", "error_category",
             "latency_ttft_ms")  # fmt: skip
"""The model-call record fields a trajectory's `response_metadata` holds (null where the record
has none, as NeMo Gym's model dumps them)."""


@dataclass
class EpisodeTrace:
    """What the agent loop observed of one episode, for its trajectory."""

    turns: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    conversation: list[Any] = field(default_factory=list)
    status: str = "completed"
    started_at: float = field(default_factory=time.time)
    """When the episode began (its `ng_perf` wall time runs from here to its verified row)."""

    def turn(self, question: list[Any], output: Sequence[Mapping[str, Any]], started_at: float) -> None:
        """One policy call: what it was sent and what it answered."""
        reasoning = [dict(i) for i in output if i.get("type") == "reasoning"] or None
        answer = [dict(i) for i in output if i.get("type") != "reasoning"]
        self.turns.append({"question": typed(question), "answer": answer, "reasoning_content": reasoning,
                           "timestamp": started_at, "step_count": len(self.tool_calls)})  # fmt: skip

    def single_turn(self, request: Mapping[str, Any], response: Mapping[str, Any], asked_at: float) -> None:
        """A one-call rollout: its request and answer, as simple_agent traces a one-step episode."""
        given = request.get("input", [])
        question: list[Any] = [{"role": "user", "content": given}] if isinstance(given, str) else list(given)
        items = [i for i in response.get("output") or () if isinstance(i, dict)]
        self.turn(question, items, asked_at)
        self.conversation = [*question, *items]
        self.status = "incomplete" if response.get("status") == "incomplete" else "completed"

    def tool(self, call_id: Any, name: Any, started_at: float, seconds: float, failed: bool, output: str) -> None:
        """One tool call, as the loop ran it (timing the executor's)."""
        self.tool_calls.append({
            "kind": "tool_call", "invocation_id": "root", "tool_call_id": str(call_id), "sandbox_id": None, "tool_name": name,
            "started_at": started_at, "completed_at": max(started_at, time.time()), "duration_ms": seconds * 1000,
            "timing_source": "executor", "status": "failed" if failed else "completed",
            "error_type": "tool_error" if failed else None, "output": output,
        })  # fmt: skip
        if self.turns:
            self.turns[-1]["step_count"] = len(self.tool_calls)


def typed(items: Sequence[Any]) -> list[Any]:
    """Conversation items as NeMo Gym's models read them: a message given without its `type`
    (`{"role": "user", "content": ...}`) says `"type": "message"` (its ATIF export requires it)."""
    return [{**i, "type": "message"} if isinstance(i, dict) and "type" not in i and "role" in i else i for i in items]


def model_call_entry(record: Mapping[str, Any]) -> dict[str, Any]:
    """A captured model-call record (payloads kept) as a trajectory's model call."""
    return {
        "model_call_id": record.get("model_call_id"),
        "started_at": record.get("started_at"),
        "completed_at": record.get("completed_at"),
        "duration_ms": record.get("latency_total_ms"),
        "request": record.get("request") if record.get("request") is not None else record.get("request_raw"),
        "response": record.get("response") if record.get("response") is not None else record.get("response_raw"),
        "response_metadata": {k: record.get(k) for k in _METADATA},
        "token_stats": {
            "prompt_tokens": record.get("tokens_in"), "completion_tokens": record.get("tokens_out"),
            "reasoning_tokens": record.get("tokens_reasoning"), "total_tokens": record.get("tokens_total"),
            "cached_tokens": record.get("cached_tokens"),
        },
    }  # fmt: skip


def task_id_of(row: Mapping[str, Any]) -> str:
    """NeMo Gym's trajectory task id: the row's `task_id`, `problem_id`, `instance_id` or task index."""
    return next((str(row[k]) for k in ("task_id", "problem_id", "instance_id", "_ng_task_index") if row.get(k) is not None), "unknown")


def trajectory(trace: EpisodeTrace, records: Sequence[Mapping[str, Any]], row: Mapping[str, Any], rollout_id: str | None) -> dict[str, Any]:
    """The rollout's `ng_trajectory` (schema 1.0): `records` are its captured model-call
    records with their payloads, in call order; a turn's model call is the call that answered
    it (the last attempt of its generation)."""
    out = _record(trace, records, row, rollout_id, None)
    gaps = out["gaps"]
    if not records:
        gaps.append({"code": "model_calls_unavailable", "invocation_id": None, "detail": None})
    if not out["turns"]:
        gaps.append({"code": "turns_unavailable", "invocation_id": None, "detail": None})
    if not trace.conversation:
        gaps.append({"code": "conversation_unavailable", "invocation_id": None, "detail": None})
    out["model_calls"] = [model_call_entry(r) for r in records]
    out["gaps"] = list({(g["code"], g["invocation_id"], g["detail"]): g for g in gaps}.values())
    return out


def agent_trajectory(trace: EpisodeTrace, records: Sequence[Mapping[str, Any]], row: Mapping[str, Any], rollout_id: str | None,
                     model_ref: Mapping[str, Any]) -> dict[str, Any]:  # fmt: skip
    """The trajectory NeMo Gym's simple_agent gives with its flat `/run` answer (its collection then
    adds the captured calls and projects the rollout's `ng_trajectory` from both): each policy call
    referenced by its model server (`model_ref`) and response id, no model calls of its own."""
    return _record(trace, records, row, rollout_id, model_ref)


def _record(trace: EpisodeTrace, records: Sequence[Mapping[str, Any]], row: Mapping[str, Any], rollout_id: str | None,
            model_ref: Mapping[str, Any] | None) -> dict[str, Any]:  # fmt: skip
    """Invocation, turns, tool calls and the agent's own gaps; a turn's call referenced by capture
    id, or with `model_ref` by that server and the response id (as simple_agent references them)."""
    from gym_metrics.recording._items import as_dumped  # (the item models: only a run that records loads them)

    task, rollout = task_id_of(row), rollout_id or "unknown"
    answered = [r for r in records if r.get("response") is not None]
    gaps: list[dict[str, Any]] = []
    turns = []
    for n, (turn, call) in enumerate(zip(trace.turns, [*answered, *[None] * len(trace.turns)]), start=1):
        if model_ref is None:
            refs = [{"model_call_id": call["model_call_id"], "model_ref": None, "response_id": call.get("response_id")}] if call else []
        else:
            refs = [{"model_call_id": None, "model_ref": dict(model_ref), "response_id": call["response_id"]}] if call and call.get("response_id") else []
        if not refs:
            gaps.append({"code": "model_call_reference_unavailable", "invocation_id": "root", "detail": f"turn:{n}"})
        question, answer = turn["question"], turn["answer"]
        if model_ref is not None:  # as simple_agent's typed items dump
            question, answer = [as_dumped(i) for i in question], [as_dumped(i) for i in answer]
        turns.append({"invocation_id": "root", "task_id": task, "rollout_id": rollout, "turn_no": n, "timestamp": turn["timestamp"],
                      "question": question, "answer": answer, "reasoning_content": turn["reasoning_content"],
                      "resolved": None, "step_count": turn["step_count"], "model_calls": refs})  # fmt: skip
    resolved = row.get("resolved")
    if isinstance(resolved, bool) and turns:
        turns[-1]["resolved"] = resolved
    else:
        gaps.append({"code": "resolution_unavailable", "invocation_id": "root", "detail": None})
    invocation = {
        "kind": "agent_invocation", "invocation_id": "root", "parent_invocation_id": None, "spawned_by_tool_call_id": None,
        "status": trace.status, "duration_ms": None, "error_type": None,
        "model_calls": [ref for t in turns for ref in t["model_calls"]], "conversation": [as_dumped(i) for i in typed(trace.conversation)],
    }  # fmt: skip
    return {"schema_version": "1.0", "task_id": task, "rollout_id": rollout, "invocations": [invocation], "turns": turns,
            "model_calls": [], "tool_calls": trace.tool_calls, "gaps": gaps}  # fmt: skip


def session_observations(trace: EpisodeTrace, records: Sequence[Mapping[str, Any]], model_ref: Mapping[str, Any]) -> dict[str, Any]:
    """What NeMo Gym's simple_agent gives back at its agent session's close (`ng_agent_observations`,
    an AgentObservationBundle): its one invocation, each policy call referenced by its model server
    (`model_ref`) and response id, never by capture id (the collection joins them), a call answered
    without an id a gap; no turns and no tool calls (the bundle has no room for them)."""
    own = _record(trace, records, {}, None, model_ref)  # simple_agent's own record: its invocation and reference gaps
    gaps = [g for g in own["gaps"] if g["code"] == "model_call_reference_unavailable"]
    return {"source": "simple_agent", "records": own["invocations"], "gaps": gaps}
