"""NeMo Gym's observation and trajectory contracts (`nemo_gym.rollout_observability`), as the
agents that report what they did (simple_agent_with_compaction, verifiers_agent, the harness
agents) build them: an `AgentObservationBundle` on their `/run` answer
(`ng_agent_observations`), or a whole `TrajectoryRecord` (`ng_trajectory`). Every model refuses
fields it does not name and checks what NeMo Gym's checks (non-negative counts and durations, a
call reference that names its call, unique ids, no parent cycle), so a ported agent fails where
it fails under NeMo Gym; `join_model_call_observations` joins a bundle to the rollout's captured
model calls as NeMo Gym's collection does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SerializationInfo, SerializerFunctionWrapHandler, WrapSerializer, model_validator

from gym_metrics.nemo_gym.config_types import ModelServerRef
from gym_metrics.nemo_gym.openai_utils import NeMoGymResponse
from gym_metrics.recording import ITEM_MODELS, ConversationItem, own_dump


def _dumped(item: Any, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
    """An item that was never validated here (put in by an agent's `model_copy(update=...)`, as
    NeMo Gym's demo agents do): dumped by its own class, as NeMo Gym's union dumps its own typed
    items, or as the JSON it is, without pydantic's warning for a value its union does not name."""
    return handler(item) if isinstance(item, ITEM_MODELS) else own_dump(item, info)


# A conversation item given as a model (an agent's openai_utils items) is validated from its fields:
# NeMo Gym's union takes its own typed items as they are, which were checked when they were made.
_Item = Annotated[
    ConversationItem, BeforeValidator(lambda item: item.model_dump() if isinstance(item, BaseModel) else item), WrapSerializer(_dumped)
]


class ObservationModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelCallRef(ObservationModel):
    """How an observation names one model call: its id, or its model server and response id."""

    model_call_id: Optional[str] = None
    model_ref: Optional[ModelServerRef] = None
    response_id: Optional[str] = None

    @model_validator(mode="after")
    def validate_join_key(self) -> ModelCallRef:
        if not self.model_call_id and not (self.model_ref is not None and self.response_id):
            raise ValueError("model_call_id or both model_ref and response_id are required")
        return self


class TrajectoryTokenStats(ObservationModel):
    prompt_tokens: Optional[int] = Field(default=None, ge=0)
    completion_tokens: Optional[int] = Field(default=None, ge=0)
    reasoning_tokens: Optional[int] = Field(default=None, ge=0)
    total_tokens: Optional[int] = Field(default=None, ge=0)
    cached_tokens: Optional[int] = Field(default=None, ge=0)


class TrajectoryResponseMetadata(ObservationModel):
    response_id: Optional[str] = None
    model_ref: Optional[ModelServerRef] = None
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
    latency_ttft_ms: Optional[float] = Field(default=None, ge=0)


class TrajectoryModelCall(ObservationModel):
    model_call_id: Optional[str] = None
    started_at: Optional[float] = None
    completed_at: Optional[float] = None
    duration_ms: Optional[float] = Field(default=None, ge=0)
    request: Optional[Any] = None
    response: Optional[Any] = None
    response_metadata: TrajectoryResponseMetadata = Field(default_factory=TrajectoryResponseMetadata)
    token_stats: TrajectoryTokenStats = Field(default_factory=TrajectoryTokenStats)


class TrajectoryTurn(ObservationModel):
    invocation_id: str
    task_id: str
    rollout_id: str
    turn_no: int = Field(ge=1)
    """Within its invocation."""
    timestamp: float
    question: Optional[Any] = None
    answer: Optional[Any] = None
    reasoning_content: Optional[Any] = None
    resolved: Optional[bool] = None
    step_count: int = Field(ge=0)
    """The producer's cumulative count of steps within its invocation."""
    model_calls: list[ModelCallRef] = Field(default_factory=list)


class AgentInvocation(ObservationModel):
    """One agent (the root, or a subagent) conversation a harness observed."""

    kind: Literal["agent_invocation"] = "agent_invocation"
    invocation_id: str
    parent_invocation_id: Optional[str] = None
    spawned_by_tool_call_id: Optional[str] = None
    status: Literal["completed", "failed", "incomplete", "unknown"] = "unknown"
    duration_ms: Optional[float] = Field(default=None, ge=0)
    error_type: Optional[str] = None
    model_calls: list[ModelCallRef] = Field(default_factory=list)
    conversation: list[_Item] = Field(default_factory=list)
    """Validated as NeMo Gym's typed input items (its parts' TypedDicts refuse a part they do not
    name and keep only the keys they declare, in their order): recording's strict mirror."""


ToolStatus = Literal["completed", "failed", "timeout", "cancelled", "incomplete", "unknown"]


class ToolCallObservation(ObservationModel):
    """One tool call's timing, as the agent saw it."""

    kind: Literal["tool_call"] = "tool_call"
    invocation_id: str
    tool_call_id: str
    sandbox_id: Optional[str] = None
    """The sandbox the call ran in (shared by concurrent calls)."""
    tool_name: Optional[str] = None
    started_at: Optional[float] = None
    completed_at: Optional[float] = None
    duration_ms: Optional[float] = Field(default=None, ge=0)
    timing_source: Optional[Literal["executor", "artifact", "harness"]] = None
    status: ToolStatus = "unknown"
    error_type: Optional[str] = None

    @model_validator(mode="after")
    def validate_timing(self) -> ToolCallObservation:
        if self.started_at is not None and self.completed_at is not None and self.completed_at < self.started_at:
            raise ValueError("completed_at must not precede started_at")
        return self


class TrajectoryToolCall(ToolCallObservation):
    """A tool call in a trajectory: its observation and the output the model saw."""

    output: Optional[Any] = None


class SandboxObservation(ObservationModel):
    """A sandbox's outcome and its measured use over its life."""

    kind: Literal["sandbox"] = "sandbox"
    role: Literal["agent", "verifier", "environment"]
    provider: Optional[str] = None
    sandbox_id: Optional[str] = None
    outcome: Literal["completed", "failed", "timeout", "oom", "sandbox_error", "cancelled", "unknown"] = "unknown"
    exit_code: Optional[int] = None
    wall_time_s: Optional[float] = Field(default=None, ge=0)
    cpu_time_s: Optional[float] = Field(default=None, ge=0)
    peak_memory_mib: Optional[float] = Field(default=None, ge=0)
    resource_usage_source: Optional[str] = None
    error_type: Optional[str] = None


class ContextCompactionObservation(ObservationModel):
    """A context compaction the agent reported: when, why, the tokens before and after, and the
    model calls around and of it."""

    kind: Literal["context_compaction"] = "context_compaction"
    invocation_id: str
    observed_at: Optional[float] = None
    trigger: Optional[str] = None
    tokens_before: Optional[int] = Field(default=None, ge=0)
    tokens_after: Optional[int] = Field(default=None, ge=0)
    outcome: Literal["completed", "failed", "aborted", "unknown"] = "unknown"
    summary: Optional[str] = None
    first_kept_item_id: Optional[str] = None
    before_model_call: Optional[ModelCallRef] = None
    model_calls: list[ModelCallRef] = Field(default_factory=list)
    after_model_call: Optional[ModelCallRef] = None


class ObservationGap(ObservationModel):
    """What the agent could not observe or join exactly."""

    code: str
    invocation_id: Optional[str] = None
    detail: Optional[str] = None


AgentObservationRecord = Annotated[
    Union[AgentInvocation, ToolCallObservation, ContextCompactionObservation, SandboxObservation],
    Field(discriminator="kind"),
]


class AgentObservationBundle(ObservationModel):
    """What one agent observed of one rollout (records in no particular order)."""

    source: str
    records: list[AgentObservationRecord] = Field(default_factory=list)
    gaps: list[ObservationGap] = Field(default_factory=list)

    @model_validator(mode="after")
    def validate_identity(self) -> AgentObservationBundle:
        """Invocation ids are unique and parents form no cycle (a parent not in the bundle is
        allowed: a producer may see part of the tree)."""
        invocations = [r for r in self.records if isinstance(r, AgentInvocation)]
        parent = {r.invocation_id: r.parent_invocation_id for r in invocations}
        if len(parent) != len(invocations):
            raise ValueError("invocation_id must be unique within an observation bundle")
        acyclic: set[str] = set()
        for start in parent:
            seen: set[str] = set()
            at: Optional[str] = start
            while at is not None and at in parent and at not in acyclic:
                if at in seen:
                    raise ValueError("parent_invocation_id must not form a cycle")
                seen.add(at)
                at = parent[at]
            acyclic |= seen
        return self


class TrajectoryRecord(ObservationModel):
    """A rollout's trajectory (schema 1.0), what NeMo Gym's collection writes as `ng_trajectory`."""

    schema_version: Literal["1.0"] = "1.0"
    task_id: str
    rollout_id: str
    invocations: list[AgentInvocation] = Field(default_factory=list)
    turns: list[TrajectoryTurn] = Field(default_factory=list)
    model_calls: list[TrajectoryModelCall] = Field(default_factory=list)
    tool_calls: list[TrajectoryToolCall] = Field(default_factory=list)
    gaps: list[ObservationGap] = Field(default_factory=list)

    @model_validator(mode="after")
    def validate_identity(self) -> TrajectoryRecord:
        ids = [i.invocation_id for i in self.invocations]
        if len(ids) != len(set(ids)):
            raise ValueError("invocation_id must be unique within a trajectory")
        calls = [c.model_call_id for c in self.model_calls if c.model_call_id]
        if len(calls) != len(set(calls)):
            raise ValueError("model_call_id must be unique within a trajectory")
        turns: set[tuple[str, int]] = set()
        for turn in self.turns:
            if (turn.task_id, turn.rollout_id) != (self.task_id, self.rollout_id):
                raise ValueError("turn identity must match the trajectory")
            if (turn.invocation_id, turn.turn_no) in turns:
                raise ValueError("turn number must be unique within an invocation")
            turns.add((turn.invocation_id, turn.turn_no))
        return self


@dataclass(frozen=True)
class AgentEpisode:
    """An agent's answer and what it observed producing it."""

    response: NeMoGymResponse
    observations: AgentObservationBundle


_JOIN_CODES = ("model_call_reference_ambiguous", "model_call_reference_conflict", "model_call_reference_unmatched")


def _get(call: Any, name: str) -> Any:
    """A captured call's field: a ModelCallRecord's attribute or a record dict's key."""
    return call.get(name) if isinstance(call, Mapping) else getattr(call, name, None)


def _server(ref: Any) -> tuple[Any, Any] | None:
    """A model server reference as (type, name), given as a model or a dict."""
    if ref is None:
        return None
    return (ref.get("type"), ref.get("name")) if isinstance(ref, Mapping) else (ref.type, ref.name)


def _canonical(call: Any) -> ModelCallRef:
    return ModelCallRef.model_validate({"model_call_id": _get(call, "model_call_id"), "model_ref": _get(call, "model_ref"), "response_id": _get(call, "response_id")})


class _Captured:
    """The rollout's captured calls, found by a reference: by call id (its server and response
    id checked where the reference names them), else by (server, response id)."""

    def __init__(self, calls: list[Any]) -> None:
        self.by_id: dict[str, list[Any]] = {}
        self.by_response: dict[tuple[Any, Any, str], list[Any]] = {}
        for call in calls:
            if _get(call, "model_call_id"):
                self.by_id.setdefault(_get(call, "model_call_id"), []).append(call)
            server, response = _server(_get(call, "model_ref")), _get(call, "response_id")
            if server is not None and response:
                self.by_response.setdefault((*server, response), []).append(call)

    def find(self, ref: ModelCallRef) -> list[Any]:
        if ref.model_call_id:
            server = _server(ref.model_ref)
            return [c for c in self.by_id.get(ref.model_call_id, [])
                    if (server is None or server == _server(_get(c, "model_ref"))) and (ref.response_id is None or ref.response_id == _get(c, "response_id"))]  # fmt: skip
        assert ref.model_ref is not None and ref.response_id is not None
        return self.by_response.get((ref.model_ref.type, ref.model_ref.name, ref.response_id), [])


def _adopt_session_calls(invocations: dict[str, AgentInvocation], calls: list[Any]) -> None:
    """A captured call sent under an invocation's id as its client session (`x-session-id`)
    belongs to that invocation: referenced there unless it already is, by any of its keys."""
    for call in calls:
        call_id, session = _get(call, "model_call_id"), _get(call, "client_session_id")
        invocation = invocations.get(session) if call_id and session else None
        if invocation is None:
            continue
        server, response = _server(_get(call, "model_ref")), _get(call, "response_id")
        held = {(r.model_call_id, _server(r.model_ref), r.response_id) for r in invocation.model_calls}
        keys = {(call_id, s, r) for s in (None, server) for r in (None, response)}
        if server is not None and response is not None:
            keys.add((None, server, response))
        if not keys & held:
            invocation.model_calls = [*invocation.model_calls, _canonical(call)]


def join_model_call_observations(bundle: AgentObservationBundle, calls: Iterable[Any]) -> AgentObservationBundle:
    """`bundle` with each model-call reference resolved against the rollout's captured `calls`
    (ModelCallRecords or their dicts), never guessing: a reference that finds no call or several,
    or a call another invocation holds, stays as given with a gap saying so; a call no
    invocation holds is a `model_call_ownership_unavailable` gap. `bundle` is not changed."""
    records: list[Any] = [
        r.model_copy(update={"model_calls": list(r.model_calls)}) if isinstance(r, AgentInvocation)
        else r.model_copy() if isinstance(r, ContextCompactionObservation) else r
        for r in bundle.records
    ]  # fmt: skip
    result = bundle.model_copy(update={"records": records})
    invocations = {r.invocation_id: r for r in records if isinstance(r, AgentInvocation)}
    captured = list(calls)
    _adopt_session_calls(invocations, captured)
    index = _Captured(captured)
    gaps = [g for g in bundle.gaps if g.code not in _JOIN_CODES
            and not (g.code == "model_call_ownership_unavailable" and g.invocation_id is None and (g.detail or "").startswith("capture:"))]  # fmt: skip
    owner: dict[int, str] = {}

    def unresolved(found: list[Any], invocation_id: str, detail: Optional[str]) -> None:
        code = "model_call_reference_ambiguous" if found else "model_call_reference_unmatched"
        gaps.append(ObservationGap(code=code, invocation_id=invocation_id, detail=detail))

    def name(call: Any) -> Any:
        return _get(call, "model_call_id") or _get(call, "response_id")

    for invocation in invocations.values():
        resolved = []
        for ref in invocation.model_calls:
            found = index.find(ref)
            if len(found) != 1:
                unresolved(found, invocation.invocation_id, ref.model_call_id or ref.response_id)
            elif id(found[0]) in owner:
                gaps.append(ObservationGap(code="model_call_reference_conflict", invocation_id=invocation.invocation_id, detail=name(found[0])))
            else:
                owner[id(found[0])] = invocation.invocation_id
                resolved.append(_canonical(found[0]))
                continue
            resolved.append(ref)
        invocation.model_calls = resolved

    for compaction in (r for r in records if isinstance(r, ContextCompactionObservation)):
        mine = compaction.invocation_id
        resolved = []
        for ref in compaction.model_calls:
            found = index.find(ref)
            if len(found) != 1:
                unresolved(found, mine, f"model_calls:{ref.model_call_id or ref.response_id}")
            elif owner.get(id(found[0])) != mine:
                code = "model_call_ownership_unavailable" if owner.get(id(found[0])) is None else "model_call_reference_conflict"
                gaps.append(ObservationGap(code=code, invocation_id=mine, detail=f"model_calls:{name(found[0])}"))
            else:
                resolved.append(_canonical(found[0]))
                continue
            resolved.append(ref)
        compaction.model_calls = resolved
        for field_name in ("before_model_call", "after_model_call"):
            ref = getattr(compaction, field_name)
            if ref is None:
                continue
            found = index.find(ref)
            if len(found) != 1:
                unresolved(found, mine, f"{field_name}:{ref.model_call_id or ref.response_id}")
            elif owner.get(id(found[0])) not in (None, mine):
                gaps.append(ObservationGap(code="model_call_reference_conflict", invocation_id=mine, detail=f"{field_name}:{name(found[0])}"))
            else:
                setattr(compaction, field_name, _canonical(found[0]))

    for call in captured:
        if id(call) not in owner:
            detail = f"capture:{name(call) or 'unknown'}:call_index={_get(call, 'call_index')}"
            gaps.append(ObservationGap(code="model_call_ownership_unavailable", detail=detail))
    result.gaps = list({(g.code, g.invocation_id, g.detail): g for g in gaps}.values())
    return result

__all__ = [
    "AgentEpisode", "AgentInvocation", "AgentObservationBundle", "AgentObservationRecord", "ContextCompactionObservation",
    "ModelCallRef", "ObservationGap", "ObservationModel", "SandboxObservation", "ToolCallObservation", "TrajectoryModelCall",
    "TrajectoryRecord", "TrajectoryResponseMetadata", "TrajectoryTokenStats", "TrajectoryToolCall", "TrajectoryTurn",
    "join_model_call_observations",
]  # fmt: skip
