"""What the health checks read of a rollout: its trajectory's model calls (flattened), the
calls its turns and invocations reference (bound as NeMo Gym binds them), its turns, its own
usage, and whether a trajectory is one at all.

The checks read the trajectory as NeMo Gym's do: validated as a TrajectoryRecord 1.0 and dumped
back to JSON-mode dicts (`recording.canonical_trajectory`), so every field is present, numeric strings are numbers,
a gap's code is a string and a model_ref holds its type and name only."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple


_TOOL_CALL_TYPES = frozenset({
    "function_call", "tool_call", "tool_use", "mcp_call", "mcp_list_tools", "mcp_approval_request", "file_search_call",
    "web_search_call", "computer_call", "image_generation_call", "code_interpreter_call", "local_shell_call", "custom_tool_call",
})  # fmt: skip
CALLS_INCOMPLETE = frozenset({"model_calls_unavailable", "model_call_capture_incomplete", "model_call_capture_records_unreadable", "model_call_capture_unreadable"})
_TEXT_KEYS = ("text", "content", "output_text", "answer", "refusal", "encrypted_content", "reasoning", "reasoning_content", "summary")


class Bindings(NamedTuple):
    references: tuple[str, ...]
    matched: tuple[dict[str, Any], ...]
    missing: tuple[str, ...]
    duplicated: tuple[tuple[str, int], ...]

    @property
    def complete(self) -> bool:
        return bool(self.references) and not self.missing and not self.duplicated


def nonempty(value: Any) -> bool:
    if isinstance(value, str):
        return bool(value.strip())
    if isinstance(value, (list, tuple)):
        for v in value:
            if nonempty(v):
                return True
        return False
    if isinstance(value, dict):
        for k in _TEXT_KEYS:
            v = value.get(k)
            if v is not None and nonempty(v):
                return True
    return False


def has_tool_call(item: Any) -> bool:
    if isinstance(item, (list, tuple)):
        return any(has_tool_call(v) for v in item)
    return isinstance(item, dict) and (item.get("type") in _TOOL_CALL_TYPES or bool(item.get("tool_calls")))


def _ref_key(ref: Mapping[str, Any]) -> str | None:
    if ref.get("model_call_id"):
        return f"call:{ref['model_call_id']}"
    model_ref, response_id = ref.get("model_ref"), ref.get("response_id")
    if isinstance(model_ref, dict) and response_id:
        return f"response:{model_ref.get('type')}:{model_ref.get('name')}:{response_id}"
    return None


def identity(call: Mapping[str, Any]) -> str | None:
    key = _ref_key(call)
    return key if key is not None else (f"response::{call['response_id']}" if call.get("response_id") else None)


class Gaps:
    """A canonical trajectory's gap codes (each a string), read once."""

    __slots__ = ("codes",)

    def __init__(self, gaps: Iterable[Mapping[str, Any]]) -> None:
        self.codes: set[str] = {g["code"] for g in gaps}

    def has(self, wanted: Iterable[str]) -> bool:
        return not self.codes.isdisjoint(wanted)


def model_calls(trajectory: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each captured model call, flattened to what the checks read."""
    out = []
    for n, raw in enumerate(trajectory.get("model_calls") or []):
        metadata, tokens = raw.get("response_metadata") or {}, raw.get("token_stats") or {}
        out.append({
            "call_index": n, "started_at": raw.get("started_at"), "model_call_id": raw.get("model_call_id"),
            "response_id": metadata.get("response_id"), "model_ref": metadata.get("model_ref"), "status_code": metadata.get("status_code"),
            "response_status": metadata.get("response_status"), "finish_reason": metadata.get("finish_reason"),
            "error_category": metadata.get("error_category"), "tokens_in": tokens.get("prompt_tokens"),
            "tokens_out": tokens.get("completion_tokens"), "response": raw.get("response"),
        })  # fmt: skip
    return out


def failed(call: Mapping[str, Any]) -> bool:
    status, response_status = call.get("status_code"), call.get("response_status")
    return (isinstance(status, int) and status >= 400) or bool(call.get("error_category")) or response_status in ("failed", "error", "cancelled")


def succeeded(call: Mapping[str, Any]) -> bool:
    status = call.get("status_code")
    return not failed(call) and (status is None or (isinstance(status, int) and 200 <= status < 400))


_Ref = tuple[str, dict[str, Any], tuple[str, str, str, str]]
"""A reference to a model call: its key, itself, and its signature (what tells two apart)."""


def _references(items: Any) -> list[_Ref]:
    return [(key, ref, _signature(ref)) for item in items or [] if isinstance(item, dict) for ref in item.get("model_calls") or []
            if isinstance(ref, dict) and (key := _ref_key(ref)) is not None]  # fmt: skip


def _signature(ref: Mapping[str, Any]) -> tuple[str, str, str, str]:
    given = ref.get("model_ref")
    model_ref: Mapping[str, Any] = given if isinstance(given, dict) else {}
    return (str(ref.get("model_call_id") or ""), str(model_ref.get("type") or ""), str(model_ref.get("name") or ""), str(ref.get("response_id") or ""))


def _unique(refs: Iterable[_Ref]) -> list[_Ref]:
    seen: set[tuple[str, str, str, str]] = set()
    out = []
    for ref in refs:
        if ref[2] not in seen:
            seen.add(ref[2])
            out.append(ref)
    return out


def _resolve(ref: Mapping[str, Any], by_id: dict[str, list[dict[str, Any]]], by_response: dict[tuple[str, str, str], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    model_ref, response_id = ref.get("model_ref"), ref.get("response_id")
    if ref.get("model_call_id"):
        return [c for c in by_id.get(str(ref["model_call_id"]), [])
                if (model_ref is None or model_ref == c.get("model_ref")) and (response_id is None or response_id == c.get("response_id"))]  # fmt: skip
    # a key without a call id has both (_ref_key)
    return by_response.get((str((model_ref or {}).get("type")), str((model_ref or {}).get("name")), str(response_id)), [])


def bindings(trajectory: Mapping[str, Any], calls: list[dict[str, Any]]) -> tuple[Bindings, Bindings]:
    """The captured calls the turns reference, and those the turns or the invocations do."""
    turn_refs = _unique(_references(trajectory.get("turns")))
    owned_refs = _unique([*turn_refs, *_references(trajectory.get("invocations"))])
    by_id: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_response: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for call in calls:
        if call.get("model_call_id"):
            by_id[str(call["model_call_id"])].append(call)
        if isinstance(call.get("model_ref"), dict) and call.get("response_id"):
            by_response[(str(call["model_ref"].get("type")), str(call["model_ref"].get("name")), str(call["response_id"]))].append(call)
    resolved = {sig: _resolve(ref, by_id, by_response) for _, ref, sig in owned_refs}

    def bind(refs: list[_Ref]) -> Bindings:
        matched: dict[int, dict[str, Any]] = {}
        missing, duplicated = [], []
        for key, _, sig in refs:
            found = resolved[sig]
            if not found:
                missing.append(key)
            elif len(found) > 1:
                duplicated.append((key, len(found)))
            else:
                matched.setdefault(found[0]["call_index"], found[0])
        return Bindings(tuple(r[0] for r in refs), tuple(matched[i] for i in sorted(matched)), tuple(missing), tuple(duplicated))

    return bind(turn_refs), bind(owned_refs)


def _referenced(turn: Mapping[str, Any]) -> bool:
    return any(isinstance(ref, dict) and _ref_key(ref) is not None for ref in turn.get("model_calls") or [])


def turns(trajectory: Mapping[str, Any]) -> list[tuple[dict[str, Any], bool, bool, bool]]:
    """Per turn: its locator, whether it said something, called a tool, referenced a call."""
    out = []
    for n, turn in enumerate(trajectory.get("turns") or []):
        said = nonempty(turn.get("answer")) or nonempty(turn.get("reasoning_content"))
        out.append(({"turn": turn.get("turn_no", n)}, said, has_tool_call(turn.get("answer")), _referenced(turn)))
    return out


def locator(call: Mapping[str, Any], fallback: Any) -> dict[str, str]:
    return {"call_id": str(call.get("model_call_id") or call.get("response_id") or fallback)}


def has_content(response: Any) -> bool:
    if not isinstance(response, dict):
        return False
    if nonempty(response.get("output_text")) or nonempty(response.get("content")):
        return True
    chat = any(nonempty(c.get("text")) or nonempty((c.get("message") or {}).get("content")) for c in response.get("choices") or [] if isinstance(c, dict))
    return nonempty(response.get("output")) or chat


def usage(record: Mapping[str, Any]) -> tuple[int, int, bool]:
    """The row's own usage (prompt, completion, both present)."""
    response = record.get("response")
    given = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(given, dict):
        return 0, 0, False
    prompt, completion = given.get("input_tokens", given.get("prompt_tokens")), given.get("output_tokens", given.get("completion_tokens"))
    prompt = prompt if type(prompt) is int and prompt >= 0 else None
    completion = completion if type(completion) is int and completion >= 0 else None
    return prompt or 0, completion or 0, prompt is not None and completion is not None


def count_of(call: Mapping[str, Any], key: str) -> int:
    value = call.get(key)
    return value if type(value) is int and value >= 0 else 0


def chains(calls: Sequence[dict[str, Any]]) -> dict[Any, list[dict[str, Any]]]:
    chains: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for call in calls:
        ref = call.get("model_ref")
        chains[(ref.get("type"), ref.get("name")) if isinstance(ref, dict) else None].append(call)
    return chains


def in_time(chain: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(chain, key=lambda c: (c.get("started_at") or 0.0, c.get("call_index") or 0))


def ended_on_failure(chain: Sequence[dict[str, Any]]) -> bool:
    """Whether this model's own last call failed (unordered calls, some failed: not said)."""
    failures = [c for c in chain if failed(c)]
    if not failures:
        return False
    if len(failures) == len(chain):
        return True
    if any(c.get("started_at") is None for c in chain):
        return False
    return failed(in_time(chain)[-1])
