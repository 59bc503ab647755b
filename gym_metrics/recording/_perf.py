"""A rollout's `ng_perf`: its turns, tool calls, token sums and wall time, read from its
`ng_trajectory` as NeMo Gym 0.7.0's collection reads them with observability on
(`nemo_gym/rollout_collection.py`, the per-rollout perf block).

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
from typing import Any

PERF_KEY = "ng_perf"
TOKEN_SUMS = (
    ("prompt_tokens", "prompt_tokens"),
    ("cached_prompt_tokens", "cached_tokens"),
    ("completion_tokens", "completion_tokens"),
    ("reasoning_tokens", "reasoning_tokens"),
)
"""(`ng_perf` key, `token_stats` key), in NeMo Gym's order."""


def rollout_perf(trajectory: Mapping[str, Any], latency_ms: float | None) -> dict[str, Any] | None:
    """The `ng_perf` of a rollout whose valid `ng_trajectory` is `trajectory` and whose episode
    took `latency_ms` (None: not measured, no `total_latency_ms`); None without invocations."""
    invocations: Sequence[Mapping[str, Any]] = trajectory.get("invocations") or ()
    if not invocations:
        return None
    calls: Sequence[Mapping[str, Any]] = trajectory.get("model_calls") or ()
    owner = _CallIndex(calls)
    owned: list[Mapping[str, Any]] = []
    owned_by: Counter[str] = Counter()
    seen: set[int] = set()
    for invocation in invocations:
        for ref in invocation.get("model_calls") or ():
            at = owner.match(ref)
            if at is not None and at not in seen:
                seen.add(at)
                owned.append(calls[at])
                owned_by[invocation["invocation_id"]] += 1
    ids = [i["invocation_id"] for i in invocations]
    tools = Counter(t.get("invocation_id") for t in trajectory.get("tool_calls") or ())
    turns = Counter(t.get("invocation_id") for t in trajectory.get("turns") or ())
    num_turns = sum(turns.get(i, 0) or owned_by.get(i, 0) or 1 for i in ids)
    perf: dict[str, Any] = {
        "num_turns": num_turns,
        "num_tool_calls": sum(tools.get(i, 0) for i in ids),
        "token_observability_coverage": min(1.0, len(owned) / num_turns),
    }
    for key, stat in TOKEN_SUMS:
        counts = [c for c in ((call.get("token_stats") or {}).get(stat) for call in owned) if c is not None]
        if counts:
            perf[key] = sum(counts)
    if isinstance(latency_ms, (int, float)):
        perf["total_latency_ms"] = latency_ms
    return perf


class _CallIndex:
    """The trajectory's model calls by id and by (model, response id), for references."""

    def __init__(self, calls: Sequence[Mapping[str, Any]]) -> None:
        self.calls = calls
        self.by_id: dict[str, list[int]] = {}
        self.by_response: dict[tuple[Any, Any, str], list[int]] = {}
        for at, call in enumerate(calls):
            if call.get("model_call_id"):
                self.by_id.setdefault(call["model_call_id"], []).append(at)
            model, response = self._meta(at)
            if isinstance(model, Mapping) and response:
                self.by_response.setdefault((model.get("type"), model.get("name"), response), []).append(at)

    def _meta(self, at: int) -> tuple[Any, Any]:
        meta = self.calls[at].get("response_metadata") or {}
        return meta.get("model_ref"), meta.get("response_id")

    def match(self, ref: Mapping[str, Any]) -> int | None:
        """The one call `ref` names, or None (none, or several)."""
        model, response = ref.get("model_ref"), ref.get("response_id")
        if ref.get("model_call_id"):
            found = [at for at in self.by_id.get(ref["model_call_id"], ())
                     if (model is None or model == self._meta(at)[0]) and (response is None or response == self._meta(at)[1])]  # fmt: skip
        elif isinstance(model, Mapping) and response:
            found = self.by_response.get((model.get("type"), model.get("name"), response), [])
        else:
            found = []
        return found[0] if len(found) == 1 else None


__all__ = ["PERF_KEY", "rollout_perf"]
