"""A rollout's `ng_perf`: its turns, tool calls, token sums and wall time, read from its
`ng_trajectory` as NeMo Gym 0.7.0's collection reads them with observability on
(`nemo_gym/rollout_collection.py`, the per-rollout perf block).

- The trajectory is first validated as NeMo Gym's TrajectoryRecord (conversation items typed):
  one it refuses gets no `ng_perf`; the counts are read as validated ("5", 5.0 and true count
  as 5, 5 and 1: a sum of them is an int, as NeMo Gym's).
- The tokens summed are those of the model calls the invocations' references own: a reference
  matches the one call with its `model_call_id` (and its `model_ref` and `response_id` where it
  names them), or with its (`model_ref`, `response_id`); none or several: no call. A call is
  owned once, whichever references name it.
- `num_turns`: per invocation, its turns, else the calls it owns, else 1;
  `token_observability_coverage`: owned calls over turns (at most 1).
- A token sum is written when some owned call has that count; no invocation: no `ng_perf`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gym_metrics.recording._trajectory_schema import CallRef, ModelCall

PERF_KEY = "ng_perf"
TOKEN_SUMS = (
    ("prompt_tokens", "prompt_tokens"),
    ("cached_prompt_tokens", "cached_tokens"),
    ("completion_tokens", "completion_tokens"),
    ("reasoning_tokens", "reasoning_tokens"),
)
"""(`ng_perf` key, `token_stats` key), in NeMo Gym's order."""


def rollout_perf(trajectory: Mapping[str, Any], latency_ms: float | None) -> dict[str, Any] | None:
    """The `ng_perf` of a rollout whose `ng_trajectory` is `trajectory` and whose episode took
    `latency_ms` (None: not measured, no `total_latency_ms`); None without invocations, or when
    NeMo Gym's TrajectoryRecord refuses `trajectory` (as its collection then adds none)."""
    if not isinstance(trajectory, Mapping) or not trajectory.get("invocations"):
        return None  # (cheaply: a record without invocations gets none, valid or not)
    from gym_metrics.recording._trajectory_schema import TypedTrajectory  # (pydantic models: loaded by a run that records)

    try:
        record = TypedTrajectory.model_validate(trajectory)  # as NeMo Gym's TrajectoryRecord (and health) validate it
    except Exception:  # noqa: BLE001 - as NeMo Gym: whatever validation raised (a TypeError for an unhashable role, ...), none
        return None
    calls = record.model_calls
    owner = _CallIndex(calls)
    owned: list[ModelCall] = []
    owned_by: Counter[str] = Counter()
    seen: set[int] = set()
    for invocation in record.invocations:
        for ref in invocation.model_calls:
            at = owner.match(ref)
            if at is not None and at not in seen:
                seen.add(at)
                owned.append(calls[at])
                owned_by[invocation.invocation_id] += 1
    ids = [i.invocation_id for i in record.invocations]
    tools = Counter(t.invocation_id for t in record.tool_calls)
    turns = Counter(t.invocation_id for t in record.turns)
    num_turns = sum(turns.get(i, 0) or owned_by.get(i, 0) or 1 for i in ids)
    perf: dict[str, Any] = {
        "num_turns": num_turns,
        "num_tool_calls": sum(tools.get(i, 0) for i in ids),
        "token_observability_coverage": min(1.0, len(owned) / num_turns),
    }
    for key, stat in TOKEN_SUMS:
        counts = [c for c in (getattr(call.token_stats, stat) for call in owned) if c is not None]
        if counts:
            perf[key] = sum(counts)
    if isinstance(latency_ms, (int, float)):
        perf["total_latency_ms"] = latency_ms
    return perf


class _CallIndex:
    """The trajectory's model calls by id and by (model, response id), for references."""

    def __init__(self, calls: Sequence[ModelCall]) -> None:
        self.calls = calls
        self.by_id: dict[str, list[int]] = {}
        self.by_response: dict[tuple[str, str, str], list[int]] = {}
        for at, call in enumerate(calls):
            if call.model_call_id:
                self.by_id.setdefault(call.model_call_id, []).append(at)
            model, response = call.response_metadata.model_ref, call.response_metadata.response_id
            if model is not None and response:
                self.by_response.setdefault((model.type, model.name, response), []).append(at)

    def match(self, ref: CallRef) -> int | None:
        """The one call `ref` names, or None (none, or several)."""
        model, response = ref.model_ref, ref.response_id
        if ref.model_call_id:
            metas = ((at, self.calls[at].response_metadata) for at in self.by_id.get(ref.model_call_id, ()))
            found = [at for at, meta in metas if (model is None or model == meta.model_ref) and (response is None or response == meta.response_id)]
        elif model is not None and response:
            found = self.by_response.get((model.type, model.name, response), [])
        else:
            found = []
        return found[0] if len(found) == 1 else None


__all__ = ["PERF_KEY", "rollout_perf"]
