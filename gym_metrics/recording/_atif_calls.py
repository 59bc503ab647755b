"""A trajectory's model calls as the ATIF export reads them: each call as its validated copy
dumps, a turn's reference resolved to its call, the checks that the call answered in full, and
its token counts as ATIF step metrics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gym_metrics.recording._atif_json import AtifRefused

_INCOMPLETE_FINISH = frozenset({
    "aborted", "canceled", "cancelled", "content_filter", "failed", "incomplete", "length", "max_output_tokens",
    "max_tokens", "model_context_window_exceeded", "pause_turn", "refusal", "timed_out", "timeout",
})  # fmt: skip
"""Finish reasons that say a model answer was cut short (NeMo Gym's list)."""
_CALL_FIELDS = ("model_call_id", "started_at", "completed_at", "duration_ms", "request", "response")
_METADATA_FIELDS = ("response_id", "model_ref", "model", "dialect", "status_code", "response_status", "finish_reason",
                    "upstream_attempted", "response_source", "upstream_status_code", "local_response_reason",
                    "error_category", "latency_ttft_ms")  # fmt: skip
_STATS_FIELDS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "total_tokens", "cached_tokens")
_FLOATS = frozenset({"started_at", "completed_at", "duration_ms", "latency_ttft_ms"})


def as_float(key: str, value: Any) -> Any:
    return float(value) if key in _FLOATS and isinstance(value, int) and not isinstance(value, bool) else value


def model_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """A trajectory's model call as its validated copy dumps (declared order, nulls left out)."""
    out = {k: as_float(k, call[k]) for k in _CALL_FIELDS if call.get(k) is not None}
    metadata = call.get("response_metadata") or {}
    out["response_metadata"] = {k: as_float(k, metadata[k]) for k in _METADATA_FIELDS if metadata.get(k) is not None}
    if "model_ref" in out["response_metadata"]:
        ref = out["response_metadata"]["model_ref"]
        out["response_metadata"]["model_ref"] = {"type": ref.get("type"), "name": ref.get("name")}
    stats = call.get("token_stats") or {}
    out["token_stats"] = {k: stats[k] for k in _STATS_FIELDS if stats.get(k) is not None}
    return out


def lookup_call(ref: Mapping[str, Any], calls: Sequence[Mapping[str, Any]], path: str) -> int:
    """The captured model call a reference names: by id, else by (model_ref, response_id)."""
    call_id, response_id, model_ref = ref.get("model_call_id"), ref.get("response_id"), ref.get("model_ref")
    if call_id is not None and not call_id.strip():
        raise AtifRefused(f"{path}.model_call_id", "cannot be blank")
    if response_id is not None and not response_id.strip():
        raise AtifRefused(f"{path}.response_id", "cannot be blank")
    if call_id:
        found = [i for i, c in enumerate(calls) if c.get("model_call_id") == call_id]
        what = f"unknown model_call_id {call_id!r}", "model_call_id matches more than one captured model call"
    else:  # the schema's CallRef holds one or the other
        key = (ref["model_ref"].get("type"), ref["model_ref"].get("name"), response_id)
        found = [i for i, c in enumerate(calls) if (m := c.get("response_metadata") or {}).get("model_ref") is not None
                 and str(m.get("response_id") or "").strip() and (m["model_ref"].get("type"), m["model_ref"].get("name"), m["response_id"]) == key]  # fmt: skip
        what = "model_ref and response_id do not match a captured model call", "model_ref and response_id match more than one captured model call"
    if len(found) != 1:
        raise AtifRefused(path, what[0] if not found else what[1])
    index, metadata = found[0], calls[found[0]].get("response_metadata") or {}
    for name, value in (("model_call_id", calls[index].get("model_call_id")), ("response_metadata.response_id", metadata.get("response_id"))):
        if value is not None and not value.strip():
            raise AtifRefused(f"ng_trajectory.model_calls[{index}].{name}", "cannot be blank")
    if response_id is not None and response_id != metadata.get("response_id"):
        raise AtifRefused(path, "response_id conflicts with the captured model call")
    if model_ref is not None and model_ref != metadata.get("model_ref"):
        raise AtifRefused(path, "model_ref conflicts with the captured model call")
    return index


def check_finish(finish: str | None, dialect: Any, tools: bool, path: str) -> None:
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


def step_metrics(stats: Mapping[str, Any], path: str) -> dict[str, Any] | None:
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
