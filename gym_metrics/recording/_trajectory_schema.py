"""What a TrajectoryRecord 1.0 (NeMo Gym 0.7.0's `ng_trajectory`) may hold, as pydantic models:
every object refuses fields it does not name, counts and durations are never negative, a
model-call reference names its call, a tool call does not end before it starts, ids are unique,
and turns belong to their trajectory. `health` calls a row whose trajectory fails them
unreadable, as NeMo Gym's health checks do, and the ATIF export refuses it (strictly, as
NeMo Gym's exporter validates: no coercion of "5" to 5).

A conversation's items are checked as objects only here (`trajectory_error`, which the ATIF
export uses, then checking them item by item: recording/_atif.py); `canonical_trajectory`, what
health reads, validates them as NeMo Gym's typed items (recording/_conversation_items.py).
"""

from __future__ import annotations

from typing import Any, Literal, Optional

import pydantic
from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, model_validator

from gym_metrics.recording._conversation_items import ConversationItem

Ms = Optional[NonNegativeFloat]
Count = Optional[NonNegativeInt]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelRef(BaseModel):  # NeMo Gym's ModelServerRef: other fields ignored
    type: Literal["responses_api_models"]
    name: str


class CallRef(_Strict):
    model_call_id: Optional[str] = None
    model_ref: Optional[ModelRef] = None
    response_id: Optional[str] = None

    @model_validator(mode="after")
    def _names_its_call(self) -> CallRef:
        if not self.model_call_id and not (self.model_ref is not None and self.response_id):
            raise ValueError("model_call_id or both model_ref and response_id are required")
        return self


class TokenStats(_Strict):
    prompt_tokens: Count = None
    completion_tokens: Count = None
    reasoning_tokens: Count = None
    total_tokens: Count = None
    cached_tokens: Count = None


class ResponseMetadata(_Strict):
    response_id: Optional[str] = None
    model_ref: Optional[ModelRef] = None
    model: Optional[str] = None
    dialect: Optional[str] = None
    status_code: Optional[int] = None
    response_status: Optional[str] = None
    finish_reason: Optional[str] = None
    upstream_attempted: Optional[bool] = None
    response_source: Optional[Literal["upstream", "local"]] = None
    upstream_status_code: Optional[int] = None
    local_response_reason: Optional[str] = None
    error_category: Optional[str] = None
    latency_ttft_ms: Ms = None


class ModelCall(_Strict):
    model_call_id: Optional[str] = None
    started_at: Optional[float] = None
    completed_at: Optional[float] = None
    duration_ms: Ms = None
    request: Any = None
    response: Any = None
    response_metadata: ResponseMetadata = Field(default_factory=ResponseMetadata)
    token_stats: TokenStats = Field(default_factory=TokenStats)


class TrajectoryTurn(_Strict):
    invocation_id: str
    task_id: str
    rollout_id: str
    turn_no: int = Field(ge=1)
    timestamp: float
    question: Any = None
    answer: Any = None
    reasoning_content: Any = None
    resolved: Optional[bool] = None
    step_count: NonNegativeInt
    model_calls: list[CallRef] = Field(default_factory=list)


class Invocation(_Strict):
    kind: Literal["agent_invocation"] = "agent_invocation"
    invocation_id: str
    parent_invocation_id: Optional[str] = None
    spawned_by_tool_call_id: Optional[str] = None
    status: Literal["completed", "failed", "incomplete", "unknown"] = "unknown"
    duration_ms: Ms = None
    error_type: Optional[str] = None
    model_calls: list[CallRef] = Field(default_factory=list)
    conversation: list[dict[str, Any]] = Field(default_factory=list)


class TrajectoryToolCall(_Strict):
    kind: Literal["tool_call"] = "tool_call"
    invocation_id: str
    tool_call_id: str
    sandbox_id: Optional[str] = None
    tool_name: Optional[str] = None
    started_at: Optional[float] = None
    completed_at: Optional[float] = None
    duration_ms: Ms = None
    timing_source: Optional[Literal["executor", "artifact", "harness"]] = None
    status: Literal["completed", "failed", "timeout", "cancelled", "incomplete", "unknown"] = "unknown"
    error_type: Optional[str] = None
    output: Any = None

    @model_validator(mode="after")
    def _in_order(self) -> TrajectoryToolCall:
        if self.started_at is not None and self.completed_at is not None and self.completed_at < self.started_at:
            raise ValueError("completed_at must not precede started_at")
        return self


class Gap(_Strict):
    code: str
    invocation_id: Optional[str] = None
    detail: Optional[str] = None


class Trajectory(_Strict):
    schema_version: Literal["1.0"] = "1.0"
    task_id: str
    rollout_id: str
    invocations: list[Invocation] = Field(default_factory=list)
    turns: list[TrajectoryTurn] = Field(default_factory=list)
    model_calls: list[ModelCall] = Field(default_factory=list)
    tool_calls: list[TrajectoryToolCall] = Field(default_factory=list)
    gaps: list[Gap] = Field(default_factory=list)

    @model_validator(mode="after")
    def _identities(self) -> Trajectory:
        invocations = [i.invocation_id for i in self.invocations]
        if len(invocations) != len(set(invocations)):
            raise ValueError("invocation_id must be unique within a trajectory")
        calls = [c.model_call_id for c in self.model_calls if c.model_call_id]
        if len(calls) != len(set(calls)):
            raise ValueError("model_call_id must be unique within a trajectory")
        keys = set()
        for turn in self.turns:
            if (turn.task_id, turn.rollout_id) != (self.task_id, self.rollout_id):
                raise ValueError("turn identity must match the trajectory")
            if (turn.invocation_id, turn.turn_no) in keys:
                raise ValueError("turn number must be unique within an invocation")
            keys.add((turn.invocation_id, turn.turn_no))
        return self


class TypedInvocation(Invocation):
    conversation: list[ConversationItem] = Field(default_factory=list)


class TypedTrajectory(Trajectory):
    """The trajectory as NeMo Gym's health checks validate it: conversation items typed."""

    invocations: list[TypedInvocation] = Field(default_factory=list)  # type: ignore[assignment]  # pydantic: the field, narrowed


def trajectory_error(raw: Any, *, strict: bool = False) -> str | None:
    """Why `raw` is not a TrajectoryRecord 1.0 (pydantic's error, the first of them), or None."""
    try:
        Trajectory.model_validate(raw, strict=strict)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}" if where else first["msg"]
    return None


def canonical_trajectory(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """A row's `ng_trajectory` validated as a TrajectoryRecord 1.0 and dumped back to JSON-mode
    dicts, as NeMo Gym's health checks read it; or why not, as NeMo Gym reports it (the
    exception's name: ValidationError; TypeError for a conversation item with an unhashable role,
    status or part type; ValueError for a payload nested too deep to dump)."""
    try:
        return TypedTrajectory.model_validate(raw).model_dump(mode="json"), None
    except Exception as exc:  # NeMo Gym names whatever validation or the dump raised
        return None, type(exc).__name__
