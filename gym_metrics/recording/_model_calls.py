"""NeMo Gym's model-call records (`ModelCallRecord`, `nemo_gym/base_responses_api_model.py`)
from captured exchanges, and the block a rollout row carries: `ng_model_call_capture =
{rollout_id, metrics, calls}`, with the request and response payloads left out unless asked
for, as NeMo Gym attaches it."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from gym_metrics.rollouts import ROLLOUT_KEY, TASK_KEY
from gym_metrics.targets import Exchange

CAPTURE_KEY = "ng_model_call_capture"
PAYLOAD_KEYS = ("request", "response", "request_raw", "response_raw")
"""A record's fields that hold the exchange itself (left out of the row by default)."""
_SUMMED = ("tokens_in", "tokens_out", "tokens_reasoning", "tokens_total", "cached_tokens", "latency_total_ms")


def rollout_id_of(row: Mapping[str, Any]) -> str | None:
    """NeMo Gym's capture key of a rollout: `_ng_rollout_id` when given, else
    "{task}-{rollout}", with "-a{n}" for a re-dispatch attempt n > 0."""
    explicit = row.get("_ng_rollout_id")
    if isinstance(explicit, str) and explicit:
        return explicit
    task, rollout = row.get(TASK_KEY), row.get(ROLLOUT_KEY)
    if task is None or rollout is None:
        return None
    attempt = row.get("_ng_attempt_index")
    suffix = f"-a{int(attempt)}" if isinstance(attempt, int) and attempt > 0 else ""
    return f"{task}-{rollout}{suffix}"


def model_call_record(exchange: Exchange, call_index: int, model_call_id: str | None = None) -> dict[str, Any]:
    """One exchange as NeMo Gym's ModelCallRecord (every field, in its order)."""
    response = exchange.response if isinstance(exchange.response, dict) else {}
    request = exchange.request if isinstance(exchange.request, dict) else {}
    usage = response.get("usage")
    tokens = token_stats(usage)
    cached = cached_tokens(usage)
    calls, reasoning = tool_calls_and_reasoning(response)
    model = response.get("model") or request.get("model")
    return {
        "model_call_id": model_call_id or uuid.uuid4().hex,
        "response_id": response.get("id") if isinstance(response.get("id"), str) else None,
        "client_session_id": exchange.client_session_id,
        "call_index": call_index,
        "model_ref": exchange.model_ref,
        "model": model if isinstance(model, str) else None,
        "dialect": exchange.dialect,
        "status_code": exchange.status_code,
        "response_status": response.get("status") if isinstance(response.get("status"), str) else None,
        "finish_reason": finish_reason(response),
        "upstream_attempted": None,
        "response_source": None,
        "upstream_status_code": None,
        "local_response_reason": None,
        "started_at": exchange.started_at,
        "completed_at": exchange.completed_at,
        "tokens_in": tokens["tokens_in"],
        "tokens_out": tokens["tokens_out"],
        "tokens_reasoning": tokens["tokens_reasoning"],
        "tokens_total": tokens["tokens_total"],
        "request": exchange.request if isinstance(exchange.request, dict) else None,
        "response": exchange.response if isinstance(exchange.response, dict) else None,
        "request_raw": None if isinstance(exchange.request, dict) or exchange.request is None else _text(exchange.request),
        "response_raw": exchange.error if exchange.response is None else None,
        "tool_calls": calls,
        "reasoning_content": reasoning,
        "cache_hit": None if cached is None else cached > 0,
        "cached_tokens": cached,
        "cache_creation_tokens": tokens["cache_creation_tokens"],
        "error_category": exchange.error_category,
        "latency_total_ms": exchange.latency_ms,
        "latency_ttft_ms": exchange.ttft_ms,
    }


def model_call_records(exchanges: Sequence[Exchange]) -> list[dict[str, Any]]:
    """The records of a rollout's exchanges, in call order (payloads included)."""
    return [model_call_record(e, i) for i, e in enumerate(exchanges)]


def capture_block(
    rollout_id: str | None, records: Sequence[dict[str, Any]], *, include_payloads: bool = False, gaps: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """The row's `ng_model_call_capture` of a rollout's model-call `records`: the rollout id,
    the summed metrics and the records (payloads only with `include_payloads`), and `gaps`
    (what could not be observed; a rollout that made no call says so)."""
    block: dict[str, Any] = {
        "rollout_id": rollout_id,
        "metrics": model_call_metrics(records),
        "calls": records if include_payloads else [{k: v for k, v in r.items() if k not in PAYLOAD_KEYS} for r in records],
    }
    found = [*([{"code": "model_call_capture_no_records"}] if not records else []), *gaps]
    if found:
        block["gaps"] = [dict(g) for g in found]
    return block


def model_call_metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Token and latency sums over the records (None where no record has the value)."""
    out: dict[str, Any] = {}
    for key in _SUMMED:
        values = [r[key] for r in records if r.get(key) is not None]
        out[key] = sum(values) if values else None
    out["num_calls"] = len(records)
    return out


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _detail(usage: Mapping[str, Any], groups: tuple[str, ...], names: tuple[str, ...]) -> int | None:
    for group in groups:
        details = usage.get(group)
        if isinstance(details, Mapping):
            for name in names:
                value = _count(details.get(name))
                if value is not None:
                    return value
    return None


def token_stats(usage: Any) -> dict[str, int | None]:
    """Token counts of a Responses, chat or Messages usage, as NeMo Gym reads them (cache reads
    and writes folded into the prompt size of a Messages usage)."""
    if not isinstance(usage, Mapping):
        return dict.fromkeys(("tokens_in", "tokens_out", "tokens_reasoning", "tokens_total", "cache_creation_tokens"))
    tokens_in = _count(usage.get("input_tokens"))
    tokens_in = tokens_in if tokens_in is not None else _count(usage.get("prompt_tokens"))
    tokens_out = _count(usage.get("output_tokens"))
    tokens_out = tokens_out if tokens_out is not None else _count(usage.get("completion_tokens"))
    read, written = _count(usage.get("cache_read_input_tokens")), _count(usage.get("cache_creation_input_tokens"))
    if read is not None or written is not None:
        extra = (read or 0) + (written or 0)
        if tokens_in is not None or extra > 0:
            tokens_in = (tokens_in or 0) + extra
    total = _count(usage.get("total_tokens"))
    if total is None and tokens_in is not None and tokens_out is not None:
        total = tokens_in + tokens_out
    reasoning = _detail(usage, ("output_tokens_details", "completion_tokens_details"), ("reasoning_tokens",))
    reasoning = reasoning if reasoning is not None else _count(usage.get("reasoning_output_tokens"))
    return {"tokens_in": tokens_in, "tokens_out": tokens_out, "tokens_reasoning": reasoning, "tokens_total": total, "cache_creation_tokens": written}


def cached_tokens(usage: Any) -> int | None:
    if not isinstance(usage, Mapping):
        return None
    found = _detail(usage, ("prompt_tokens_details", "input_tokens_details"), ("cached_tokens", "cached_input_tokens"))
    for key in ("cache_read_input_tokens", "cached_input_tokens"):
        found = found if found is not None else _count(usage.get(key))
    return found


def finish_reason(response: Mapping[str, Any]) -> str | None:
    """The first said of: `stop_reason` (Messages), the first choice's `finish_reason` (chat),
    `incomplete_details.reason` (Responses)."""
    choices = response.get("choices")
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    incomplete = response.get("incomplete_details")
    incomplete = incomplete if isinstance(incomplete, dict) else {}
    for value in (response.get("stop_reason"), first.get("finish_reason"), incomplete.get("reason")):
        if isinstance(value, str):
            return value
    return None


def _arguments(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return {"_raw": value}
        return parsed if isinstance(parsed, dict) else {"_raw": value}
    return {}


def tool_calls_and_reasoning(response: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """The answer's tool calls (`call_id`, `name`, `arguments` as a dict) and reasoning text,
    from a Responses, chat or Messages answer."""
    calls: list[dict[str, Any]] = []
    reasoning: list[str] = []
    output, choices, content = response.get("output"), response.get("choices"), response.get("content")
    if isinstance(output, list):
        for item in output:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call":
                calls.append({"call_id": item.get("call_id") or item.get("id"), "name": item.get("name"), "arguments": _arguments(item.get("arguments"))})
            elif item.get("type") == "reasoning":
                reasoning += [s["text"] for s in item.get("summary") or () if isinstance(s, dict) and isinstance(s.get("text"), str) and s["text"]]
    elif isinstance(choices, list):
        for choice in choices:
            message = choice.get("message") if isinstance(choice, dict) else None
            if not isinstance(message, Mapping):
                continue
            for call in message.get("tool_calls") or ():
                if isinstance(call, dict):
                    function = call.get("function")
                    function = function if isinstance(function, Mapping) else {}
                    calls.append({"call_id": call.get("id"), "name": function.get("name"), "arguments": _arguments(function.get("arguments"))})
            text = message.get("reasoning_content") or message.get("reasoning")
            if isinstance(text, str) and text:
                reasoning.append(text)
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                calls.append({"call_id": block.get("id"), "name": block.get("name"), "arguments": block.get("input") or {}})
            elif isinstance(block, dict) and block.get("type") in ("thinking", "redacted_thinking") and isinstance(block.get("thinking"), str):
                reasoning.append(block["thinking"])
    return calls, "\n".join(reasoning) or None


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else str(value)
