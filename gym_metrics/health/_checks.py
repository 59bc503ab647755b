"""NeMo Gym 0.7.0's rollout health checks, one rollout at a time (`nemo_gym/health/checks.py`,
`rollout_health.py`): the 14 check ids, what evidence each reads, the rules, and each rollout's
digest (its findings, the checks it could not evaluate, and the counts the run summary adds).

A check that lacks its evidence (no trajectory, no turns, no captured calls, calls no reference
binds) is `unobserved`, never passed; a rollout with a finding is `unhealthy`, else `unobserved`
when a check could not run, else `healthy`."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Verdict = Literal["healthy", "unhealthy", "unobserved"]
TASK = "_ng_task_index"
ROLLOUT = "_ng_rollout_index"

# evidence a check reads
RECORD, TRAJECTORY, TURNS, BOUND, OWNED, OBSERVED = "record", "trajectory", "turns", "bound", "owned", "observed"
ROLLOUT_CHECKS: dict[str, frozenset[str]] = {
    "check_execution_error": frozenset({RECORD}),
    "record_unreadable": frozenset({RECORD}),
    "rollout_duplicate_identity": frozenset({RECORD}),
    "rollout_missing_agent_turns": frozenset({RECORD, TRAJECTORY, TURNS}),
    "rollout_ended_on_failed_model_call": frozenset({RECORD, TRAJECTORY, OBSERVED}),
    "agent_turn_hollow": frozenset({RECORD, TRAJECTORY, TURNS}),
    "model_call_zero_completion_tokens": frozenset({RECORD, TRAJECTORY, OWNED}),
    "model_call_missing_token_counts": frozenset({RECORD, TRAJECTORY, OWNED}),
    "trajectory_capture_mismatch": frozenset({RECORD, TRAJECTORY, OWNED}),
    "model_call_failed": frozenset({RECORD, TRAJECTORY, OWNED}),
    "rollout_token_count_mismatch": frozenset({RECORD, TRAJECTORY, BOUND}),
    "model_call_runaway_generation": frozenset({RECORD, TRAJECTORY, OWNED}),
}
"""Per-rollout checks, in NeMo Gym's order, with the evidence each reads."""
TASK_CHECKS = ("task_consistently_unhealthy", "task_no_successful_model_calls")
CHECKS = (*ROLLOUT_CHECKS, *TASK_CHECKS)
"""Every check id, in NeMo Gym's order (the order of the summary's keys)."""

_TOOL_CALL_TYPES = frozenset({
    "function_call", "tool_call", "tool_use", "mcp_call", "mcp_list_tools", "mcp_approval_request", "file_search_call",
    "web_search_call", "computer_call", "image_generation_call", "code_interpreter_call", "local_shell_call", "custom_tool_call",
})  # fmt: skip
_CALLS_INCOMPLETE = frozenset({"model_calls_unavailable", "model_call_capture_incomplete", "model_call_capture_records_unreadable", "model_call_capture_unreadable"})
_CONTRADICTIONS = {
    "model_call_reference_unmatched": "missing_captured_call",
    "model_call_reference_ambiguous": "duplicated_captured_call",
    "model_call_reference_conflict": "conflicting_call_ownership",
}
_AT_LENGTH = frozenset({"length", "max_output_tokens", "max_tokens"})
_TEXT_KEYS = ("text", "content", "output_text", "answer", "refusal", "encrypted_content", "reasoning", "reasoning_content", "summary")


def check_ignored(checks: Iterable[str]) -> tuple[str, ...]:
    """The check ids to ignore, each once; an unknown id is refused naming the known ones."""
    given = tuple(dict.fromkeys(c.strip() for c in checks if c.strip()))
    unknown = sorted(set(given) - set(CHECKS))
    if unknown:
        raise ValueError(f"Unknown rollout health check(s): {', '.join(unknown)} (known: {', '.join(CHECKS)})")
    return given


def finding(check: str, detail: dict[str, Any], locator: dict[str, Any] | None = None) -> dict[str, Any]:
    """A finding as the verdicts file writes it (no locator when it has none)."""
    return {"check": check, **({"locator": locator} if locator is not None else {}), "detail": detail}


@dataclass
class Digest:
    """What one rollout's checks found, and the counts the run summary adds up."""

    task: Any
    rollout: Any
    stage: Any
    rollout_id: str
    findings: list[dict[str, Any]]
    unobserved: list[str]
    calls_seen: bool = False
    policy_calls_observed: bool = False
    model_calls: int = 0
    successful_calls: int = 0
    call_errors: int = 0
    errors_by_status: dict[str, int] = field(default_factory=dict)
    ended_on_error: bool = False
    duplicated_calls: int = 0
    usage_prompt: int = 0
    usage_completion: int = 0
    capture_prompt: int = 0
    capture_completion: int = 0

    @property
    def verdict(self) -> Verdict:
        return "unhealthy" if self.findings else "unobserved" if self.unobserved else "healthy"


@dataclass(frozen=True)
class _Bindings:
    references: tuple[str, ...]
    matched: tuple[dict[str, Any], ...]
    missing: tuple[str, ...]
    duplicated: tuple[tuple[str, int], ...]

    @property
    def complete(self) -> bool:
        return bool(self.references) and not self.missing and not self.duplicated


def _nonempty(value: Any) -> bool:
    if isinstance(value, str):
        return bool(value.strip())
    if isinstance(value, (list, tuple)):
        return any(_nonempty(v) for v in value)
    if isinstance(value, dict):
        return any(_nonempty(value.get(k)) for k in _TEXT_KEYS)
    return False


def _has_tool_call(item: Any) -> bool:
    if isinstance(item, (list, tuple)):
        return any(_has_tool_call(v) for v in item)
    return isinstance(item, dict) and (item.get("type") in _TOOL_CALL_TYPES or bool(item.get("tool_calls")))


def _ref_key(ref: Any) -> str | None:
    if not isinstance(ref, dict):
        return None
    if ref.get("model_call_id"):
        return f"call:{ref['model_call_id']}"
    model_ref, response_id = ref.get("model_ref"), ref.get("response_id")
    if isinstance(model_ref, dict) and response_id:
        return f"response:{model_ref.get('type')}:{model_ref.get('name')}:{response_id}"
    return None


def _identity(call: Mapping[str, Any]) -> str | None:
    key = _ref_key(call)
    return key if key is not None else (f"response::{call['response_id']}" if call.get("response_id") else None)


def _has_gap(trajectory: Mapping[str, Any], codes: Iterable[str]) -> bool:
    wanted = set(codes)
    return any(isinstance(g, dict) and g.get("code") in wanted for g in trajectory.get("gaps") or [])


def _calls(trajectory: Mapping[str, Any]) -> list[dict[str, Any]]:
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


def _failed(call: Mapping[str, Any]) -> bool:
    status, response_status = call.get("status_code"), call.get("response_status")
    return (isinstance(status, int) and status >= 400) or bool(call.get("error_category")) or response_status in ("failed", "error", "cancelled")


def _succeeded(call: Mapping[str, Any]) -> bool:
    status = call.get("status_code")
    return not _failed(call) and (status is None or (isinstance(status, int) and 200 <= status < 400))


def _references(items: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(key, ref) for item in items or [] if isinstance(item, dict) for ref in item.get("model_calls") or []
            if isinstance(ref, dict) and (key := _ref_key(ref)) is not None]  # fmt: skip


def _signature(ref: Mapping[str, Any]) -> tuple[str, str, str, str]:
    given = ref.get("model_ref")
    model_ref: Mapping[str, Any] = given if isinstance(given, dict) else {}
    return (str(ref.get("model_call_id") or ""), str(model_ref.get("type") or ""), str(model_ref.get("name") or ""), str(ref.get("response_id") or ""))


def _unique(refs: Iterable[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    seen: set[tuple[str, str, str, str]] = set()
    out = []
    for key, ref in refs:
        if _signature(ref) not in seen:
            seen.add(_signature(ref))
            out.append((key, ref))
    return out


def _bindings(trajectory: Mapping[str, Any], calls: list[dict[str, Any]]) -> tuple[_Bindings, _Bindings]:
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
    resolved = {}
    for _, ref in owned_refs:
        model_ref, response_id = ref.get("model_ref"), ref.get("response_id")
        if ref.get("model_call_id"):
            matches = [c for c in by_id.get(str(ref["model_call_id"]), [])
                       if (model_ref is None or model_ref == c.get("model_ref")) and (response_id is None or response_id == c.get("response_id"))]  # fmt: skip
        else:  # a key without a call id has both (_ref_key)
            matches = by_response.get((str((model_ref or {}).get("type")), str((model_ref or {}).get("name")), str(response_id)), [])
        resolved[_signature(ref)] = matches

    def bind(refs: list[tuple[str, dict[str, Any]]]) -> _Bindings:
        matched: dict[int, dict[str, Any]] = {}
        missing, duplicated = [], []
        for key, ref in refs:
            found = resolved[_signature(ref)]
            if not found:
                missing.append(key)
            elif len(found) > 1:
                duplicated.append((key, len(found)))
            else:
                matched.setdefault(found[0]["call_index"], found[0])
        return _Bindings(tuple(k for k, _ in refs), tuple(matched[i] for i in sorted(matched)), tuple(missing), tuple(duplicated))

    return bind(turn_refs), bind(owned_refs)


def _turns(trajectory: Mapping[str, Any]) -> list[tuple[dict[str, Any], bool, bool, bool]]:
    """Per turn: its locator, whether it said something, called a tool, referenced a call."""
    out = []
    for n, turn in enumerate(trajectory.get("turns") or []):
        said = _nonempty(turn.get("answer")) or _nonempty(turn.get("reasoning_content"))
        out.append(({"turn": turn.get("turn_no", n)}, said, _has_tool_call(turn.get("answer")), bool(_references([turn]))))
    return out


def _locator(call: Mapping[str, Any], fallback: Any) -> dict[str, str]:
    return {"call_id": str(call.get("model_call_id") or call.get("response_id") or fallback)}


def _has_content(response: Any) -> bool:
    if not isinstance(response, dict):
        return False
    if _nonempty(response.get("output_text")) or _nonempty(response.get("content")):
        return True
    chat = any(_nonempty(c.get("text")) or _nonempty((c.get("message") or {}).get("content")) for c in response.get("choices") or [] if isinstance(c, dict))
    return _nonempty(response.get("output")) or chat


def _usage(record: Mapping[str, Any]) -> tuple[int, int, bool]:
    """The row's own usage (prompt, completion, both present)."""
    response = record.get("response")
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return 0, 0, False
    prompt, completion = usage.get("input_tokens", usage.get("prompt_tokens")), usage.get("output_tokens", usage.get("completion_tokens"))
    prompt = prompt if type(prompt) is int and prompt >= 0 else None
    completion = completion if type(completion) is int and completion >= 0 else None
    return prompt or 0, completion or 0, prompt is not None and completion is not None


def _count(call: Mapping[str, Any], key: str) -> int:
    value = call.get(key)
    return value if type(value) is int and value >= 0 else 0


def _chains(calls: Sequence[dict[str, Any]]) -> dict[Any, list[dict[str, Any]]]:
    chains: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for call in calls:
        ref = call.get("model_ref")
        chains[(ref.get("type"), ref.get("name")) if isinstance(ref, dict) else None].append(call)
    return chains


def _in_time(chain: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(chain, key=lambda c: (c.get("started_at") or 0.0, c.get("call_index") or 0))


def _ended_on_failure(chain: Sequence[dict[str, Any]]) -> bool:
    """Whether this model's own last call failed (unordered calls, some failed: not said)."""
    failed = [c for c in chain if _failed(c)]
    if not failed:
        return False
    if len(failed) == len(chain):
        return True
    if any(c.get("started_at") is None for c in chain):
        return False
    return _failed(_in_time(chain)[-1])


def _ended(trajectory: Mapping[str, Any], calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for key, chain in _chains(calls).items():
        if _ended_on_failure(chain):
            last = _in_time(chain)[-1]
            out.append(finding("rollout_ended_on_failed_model_call", {
                "model_ref": "/".join(str(p) for p in key) if key else None, "status": last.get("status_code"),
                "error_category": last.get("error_category"), "observed_calls": len(chain),
                "successful_calls": sum(1 for c in chain if _succeeded(c)),
            }, _locator(last, last.get("call_index"))))  # fmt: skip
    return out


def _mismatch(trajectory: Mapping[str, Any], bound: _Bindings) -> list[dict[str, Any]]:
    out, seen = [], set()
    entries: list[tuple[str, str, dict[str, Any]]] = [("missing_captured_call", key, {}) for key in bound.missing]
    entries += [("duplicated_captured_call", key, {"count": n}) for key, n in bound.duplicated]
    for kind, key, more in entries:
        locator = key.split(":")[-1]
        if (kind, locator) not in seen:
            seen.add((kind, locator))
            out.append(finding("trajectory_capture_mismatch", {"kind": kind, **more}, {"call_id": locator}))
    for gap in trajectory.get("gaps") or []:
        if isinstance(gap, dict) and gap.get("code") in _CONTRADICTIONS:
            kind, locator = _CONTRADICTIONS[gap["code"]], str(gap.get("detail") or "unknown").split(":")[-1]
            if (kind, locator) not in seen:
                out.append(finding("trajectory_capture_mismatch", {"kind": kind, "observation_gap": gap["code"], "invocation_id": gap.get("invocation_id")},
                                   {"call_id": locator}))  # fmt: skip
    return out


def _call_failed(bound: _Bindings) -> list[dict[str, Any]]:
    last = max((c["call_index"] for c in bound.matched if type(c.get("call_index")) is int), default=None)
    return [finding("model_call_failed", {"status": c.get("status_code"), "error_category": c.get("error_category"),
                                          "terminal": bound.complete and last is not None and c.get("call_index") == last}, _locator(c, n))
            for n, c in enumerate(bound.matched) if _failed(c)]  # fmt: skip


def _token_mismatch(record: Mapping[str, Any], bound: _Bindings) -> list[dict[str, Any]]:
    prompt, completion, present = _usage(record)
    captured = sum(_count(c, "tokens_in") for c in bound.matched), sum(_count(c, "tokens_out") for c in bound.matched)
    if present and (prompt, completion) != captured:
        return [finding("rollout_token_count_mismatch", {"transcript_prompt": prompt, "transcript_completion": completion,
                                                         "capture_prompt": captured[0], "capture_completion": captured[1]})]  # fmt: skip
    return []


Check = Callable[[Mapping[str, Any], Mapping[str, Any], list[dict[str, Any]], _Bindings], list[dict[str, Any]]]
_RULES: dict[str, Check] = {
    "rollout_missing_agent_turns": lambda r, t, calls, b: [] if any(s or c or ref for _, s, c, ref in _turns(t))
    else [finding("rollout_missing_agent_turns", {"reason": "no agent turn with model activity"})],
    "rollout_ended_on_failed_model_call": lambda r, t, calls, b: _ended(t, calls),
    "agent_turn_hollow": lambda r, t, calls, b: [finding("agent_turn_hollow", {"reason": "agent turn has no message or tool calls"}, loc)
                                                  for loc, said, called, _ in _turns(t) if not said and not called],
    "model_call_zero_completion_tokens": lambda r, t, calls, b: [finding("model_call_zero_completion_tokens", {"completion_tokens": 0}, _locator(c, n))
                                                                  for n, c in enumerate(b.matched) if c.get("tokens_out") == 0],
    "model_call_missing_token_counts": lambda r, t, calls, b: [
        finding("model_call_missing_token_counts", {"missing": [f for f, k in (("prompt_tokens", "tokens_in"), ("completion_tokens", "tokens_out")) if c.get(k) is None]},
                _locator(c, n)) for n, c in enumerate(b.matched) if c.get("tokens_in") is None or c.get("tokens_out") is None],
    "trajectory_capture_mismatch": lambda r, t, calls, b: _mismatch(t, b),
    "model_call_failed": lambda r, t, calls, b: _call_failed(b),
    "rollout_token_count_mismatch": lambda r, t, calls, b: _token_mismatch(r, b),
    "model_call_runaway_generation": lambda r, t, calls, b: [
        finding("model_call_runaway_generation", {"finish_reason": c.get("finish_reason")}, _locator(c, n))
        for n, c in enumerate(b.matched) if c.get("finish_reason") in _AT_LENGTH and not _has_content(c.get("response"))],
}  # fmt: skip


def trajectory_error(raw: Any) -> str | None:
    """Why a row's `ng_trajectory` is not a TrajectoryRecord 1.0 (as the name of pydantic's
    error, which NeMo Gym reports), or None."""
    if not isinstance(raw, dict) or not isinstance(raw.get("task_id"), str) or not isinstance(raw.get("rollout_id"), str):
        return "ValidationError"
    if raw.get("schema_version", "1.0") != "1.0" or any(not isinstance(raw.get(k, []), list) for k in ("invocations", "turns", "model_calls", "tool_calls", "gaps")):
        return "ValidationError"
    if any(not isinstance(x, dict) for k in ("invocations", "turns", "model_calls", "tool_calls", "gaps") for x in raw.get(k) or []):
        return "ValidationError"
    ids = [i.get("invocation_id") for i in raw.get("invocations") or []]
    call_ids = [c.get("model_call_id") for c in raw.get("model_calls") or [] if c.get("model_call_id")]
    turns = raw.get("turns") or []
    keys = [(t.get("invocation_id"), t.get("turn_no")) for t in turns]
    if len(set(ids)) != len(ids) or len(set(call_ids)) != len(call_ids) or len(set(keys)) != len(keys):
        return "ValidationError"
    if any((t.get("task_id"), t.get("rollout_id")) != (raw["task_id"], raw["rollout_id"]) for t in turns):
        return "ValidationError"
    return None


def _index(value: Any, key: str, where: tuple[str, int, int, int]) -> int | str:
    """A task, rollout or stage index as NeMo Gym types it (an int or a string; a whole float or
    a bool is that int); anything else is refused naming the line (NeMo Gym's run fails too)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**64:
        return int(value)
    if isinstance(value, (int, str)):
        return value
    raise ValueError(f"{where[0]} line {where[2]}: {key} is {value!r}, not an integer or a string")


def check_rollout(record: dict[str, Any], parse_error: str | None, where: tuple[str, int, int, int], ignored: frozenset[str]) -> Digest:
    """One rollout's digest. `where`: its file, the file's position in the run, its line
    number and its position among the run's readable lines."""
    path, source, line, ordinal = where
    unreadable = f"__unreadable_record__:input-{source}:line-{line}"
    task, rollout = record.get(TASK, unreadable if parse_error else ordinal), record.get(ROLLOUT, 0)
    raw = record.get("ng_trajectory")
    rollout_id = str(record.get("_ng_rollout_id") or (raw.get("rollout_id") if isinstance(raw, dict) else None) or f"{task}-{rollout}")
    task, rollout = _index(task, TASK, where), _index(rollout, ROLLOUT, where)
    stage = record.get("stage_index")
    stage = None if stage is None else _index(stage, "stage_index", where)
    bad_trajectory = None if parse_error or raw is None else trajectory_error(raw)
    trajectory: dict[str, Any] | None = raw if raw is not None and not parse_error and bad_trajectory is None else None
    observed = trajectory is not None and not _has_gap(trajectory, ["trajectory_projection_failed"])
    t: dict[str, Any] = trajectory if observed and trajectory is not None else {}
    turns_seen = observed and not _has_gap(t, ["turns_unavailable"])
    scope_complete = observed and not _has_gap(t, ["turn_model_call_scope_incomplete"])
    calls_seen = observed and not _has_gap(t, _CALLS_INCOMPLETE)
    calls = _calls(t) if observed else []
    turn_bound, owned = _bindings(t, calls)
    findings: list[dict[str, Any]] = []
    unobserved: list[str] = []
    for check, reads in ROLLOUT_CHECKS.items():
        if check in ignored:
            continue
        if parse_error:
            if check == "record_unreadable":
                findings.append(finding(check, {"reason": "rollout record is unreadable", "error": parse_error}, {"source_file": path, "line": line}))
            else:
                unobserved.append(check)
            continue
        if bad_trajectory and check == "record_unreadable":
            findings.append(finding(check, {"reason": "canonical trajectory is unreadable", "error": bad_trajectory}))
            continue
        if (TRAJECTORY in reads and not observed) or (TURNS in reads and not turns_seen) or (OBSERVED in reads and not (calls_seen and calls)):
            unobserved.append(check)
            continue
        bound = owned if OWNED in reads else turn_bound
        if reads & {OWNED, BOUND}:
            enough = (bool(bound.references) or any(isinstance(g, dict) and g.get("code") in _CONTRADICTIONS for g in t.get("gaps") or [])
                      if check == "trajectory_capture_mismatch" else bool(bound.matched))  # fmt: skip
            if not calls_seen or not enough:
                unobserved.append(check)
                continue
        if check == "rollout_token_count_mismatch" and (
            not scope_complete or not bound.complete or not bound.matched or not _usage(record)[2]
            or any(c.get("tokens_in") is None or c.get("tokens_out") is None for c in bound.matched)
        ):  # fmt: skip
            unobserved.append(check)
            continue
        if check == "model_call_runaway_generation" and any(c.get("finish_reason") in _AT_LENGTH and c.get("response") is None for c in bound.matched):
            unobserved.append(check)
            continue
        rule = _RULES.get(check)
        if rule is None:
            continue
        try:
            findings.extend(rule(record, t, calls, bound))
        except Exception as exc:  # a check's own failure is a finding, not a crash of the run
            unobserved.append(check)
            if "check_execution_error" not in ignored:
                findings.append(finding("check_execution_error", {"reason": "check raised an unexpected exception", "failed_check": check, "error": type(exc).__name__}))
    failed = [c for c in calls if _failed(c)]
    identities = Counter(i for c in calls if (i := _identity(c)) is not None)
    prompt, completion, _ = _usage(record)
    return Digest(
        task, rollout, stage, rollout_id, findings, unobserved, calls_seen=bool(calls),
        policy_calls_observed=scope_complete and turn_bound.complete, model_calls=len(calls),
        successful_calls=sum(_succeeded(c) for c in turn_bound.matched), call_errors=len(failed),
        errors_by_status=dict(Counter(str(c.get("status_code") if c.get("status_code") is not None else "unknown") for c in failed)),
        ended_on_error=any(_ended_on_failure(chain) for chain in _chains(calls).values()),
        duplicated_calls=sum(n - 1 for n in identities.values() if n > 1), usage_prompt=prompt, usage_completion=completion,
        capture_prompt=sum(_count(c, "tokens_in") for c in calls), capture_completion=sum(_count(c, "tokens_out") for c in calls),
    )  # fmt: skip
