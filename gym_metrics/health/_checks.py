"""NeMo Gym 0.7.0's rollout health checks, one rollout at a time (`nemo_gym/health/checks.py`,
`rollout_health.py`): the 14 check ids, what evidence each reads, the rules, and each rollout's
digest (its findings, the checks it could not evaluate, and the counts the run summary adds).

A check that lacks its evidence (no trajectory, no turns, no captured calls, calls no reference
binds) is `unobserved`, never passed; a rollout with a finding is `unhealthy`, else `unobserved`
when a check could not run, else `healthy`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from gym_metrics.health._evidence import (
    CALLS_INCOMPLETE,
    Bindings,
    bindings,
    chains,
    count_of,
    ended_on_failure,
    failed,
    has_content,
    has_gap,
    identity,
    in_time,
    locator,
    model_calls,
    succeeded,
    trajectory_error,
    turns,
    usage,
)

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

_CONTRADICTIONS = {
    "model_call_reference_unmatched": "missing_captured_call",
    "model_call_reference_ambiguous": "duplicated_captured_call",
    "model_call_reference_conflict": "conflicting_call_ownership",
}
_AT_LENGTH = frozenset({"length", "max_output_tokens", "max_tokens"})


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


def _ended(trajectory: Mapping[str, Any], calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for key, chain in chains(calls).items():
        if ended_on_failure(chain):
            last = in_time(chain)[-1]
            out.append(finding("rollout_ended_on_failed_model_call", {
                "model_ref": "/".join(str(p) for p in key) if key else None, "status": last.get("status_code"),
                "error_category": last.get("error_category"), "observed_calls": len(chain),
                "successful_calls": sum(1 for c in chain if succeeded(c)),
            }, locator(last, last.get("call_index"))))  # fmt: skip
    return out


def _mismatch(trajectory: Mapping[str, Any], bound: Bindings) -> list[dict[str, Any]]:
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


def _call_failed(bound: Bindings) -> list[dict[str, Any]]:
    last = max((c["call_index"] for c in bound.matched if type(c.get("call_index")) is int), default=None)
    return [finding("model_call_failed", {"status": c.get("status_code"), "error_category": c.get("error_category"),
                                          "terminal": bound.complete and last is not None and c.get("call_index") == last}, locator(c, n))
            for n, c in enumerate(bound.matched) if failed(c)]  # fmt: skip


def _token_mismatch(record: Mapping[str, Any], bound: Bindings) -> list[dict[str, Any]]:
    prompt, completion, present = usage(record)
    captured = sum(count_of(c, "tokens_in") for c in bound.matched), sum(count_of(c, "tokens_out") for c in bound.matched)
    if present and (prompt, completion) != captured:
        return [finding("rollout_token_count_mismatch", {"transcript_prompt": prompt, "transcript_completion": completion,
                                                         "capture_prompt": captured[0], "capture_completion": captured[1]})]  # fmt: skip
    return []


Check = Callable[[Mapping[str, Any], Mapping[str, Any], list[dict[str, Any]], Bindings], list[dict[str, Any]]]
_RULES: dict[str, Check] = {
    "rollout_missing_agent_turns": lambda r, t, calls, b: [] if any(s or c or ref for _, s, c, ref in turns(t))
    else [finding("rollout_missing_agent_turns", {"reason": "no agent turn with model activity"})],
    "rollout_ended_on_failed_model_call": lambda r, t, calls, b: _ended(t, calls),
    "agent_turn_hollow": lambda r, t, calls, b: [finding("agent_turn_hollow", {"reason": "agent turn has no message or tool calls"}, loc)
                                                  for loc, said, called, _ in turns(t) if not said and not called],
    "model_call_zero_completion_tokens": lambda r, t, calls, b: [finding("model_call_zero_completion_tokens", {"completion_tokens": 0}, locator(c, n))
                                                                  for n, c in enumerate(b.matched) if c.get("tokens_out") == 0],
    "model_call_missing_token_counts": lambda r, t, calls, b: [
        finding("model_call_missing_token_counts", {"missing": [f for f, k in (("prompt_tokens", "tokens_in"), ("completion_tokens", "tokens_out")) if c.get(k) is None]},
                locator(c, n)) for n, c in enumerate(b.matched) if c.get("tokens_in") is None or c.get("tokens_out") is None],
    "trajectory_capture_mismatch": lambda r, t, calls, b: _mismatch(t, b),
    "model_call_failed": lambda r, t, calls, b: _call_failed(b),
    "rollout_token_count_mismatch": lambda r, t, calls, b: _token_mismatch(r, b),
    "model_call_runaway_generation": lambda r, t, calls, b: [
        finding("model_call_runaway_generation", {"finish_reason": c.get("finish_reason")}, locator(c, n))
        for n, c in enumerate(b.matched) if c.get("finish_reason") in _AT_LENGTH and not has_content(c.get("response"))],
}  # fmt: skip


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
    observed = trajectory is not None and not has_gap(trajectory, ["trajectory_projection_failed"])
    t: dict[str, Any] = trajectory if observed and trajectory is not None else {}
    turns_seen = observed and not has_gap(t, ["turns_unavailable"])
    scope_complete = observed and not has_gap(t, ["turn_model_call_scope_incomplete"])
    calls_seen = observed and not has_gap(t, CALLS_INCOMPLETE)
    calls = model_calls(t) if observed else []
    turn_bound, owned = bindings(t, calls)
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
            not scope_complete or not bound.complete or not bound.matched or not usage(record)[2]
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
    failures = [c for c in calls if failed(c)]
    identities = Counter(i for c in calls if (i := identity(c)) is not None)
    prompt, completion, _ = usage(record)
    return Digest(
        task, rollout, stage, rollout_id, findings, unobserved, calls_seen=bool(calls),
        policy_calls_observed=scope_complete and turn_bound.complete, model_calls=len(calls),
        successful_calls=sum(succeeded(c) for c in turn_bound.matched), call_errors=len(failures),
        errors_by_status=dict(Counter(str(c.get("status_code") if c.get("status_code") is not None else "unknown") for c in failures)),
        ended_on_error=any(ended_on_failure(chain) for chain in chains(calls).values()),
        duplicated_calls=sum(n - 1 for n in identities.values() if n > 1), usage_prompt=prompt, usage_completion=completion,
        capture_prompt=sum(count_of(c, "tokens_in") for c in calls), capture_completion=sum(count_of(c, "tokens_out") for c in calls),
    )  # fmt: skip
