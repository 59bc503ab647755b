"""NeMo Gym 0.7.0's rollout health checks, one rollout at a time (`nemo_gym/health/checks.py`,
`rollout_health.py`): the 14 check ids, what evidence each reads, the rules, and each rollout's
digest (its findings, the checks it could not evaluate, and the counts the run summary adds).

A check that lacks its evidence (no trajectory, no turns, no captured calls, calls no reference
binds) is `unobserved`, never passed; a rollout with a finding is `unhealthy`, else `unobserved`
when a check could not run, else `healthy`. A row without a usable trajectory (most rows of a
run collected without --trajectory) takes a short path: its digest is known from its keys."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from gym_metrics.health._evidence import (
    CALLS_INCOMPLETE,
    Bindings,
    Gaps,
    bindings,
    chains,
    count_of,
    ended_on_failure,
    failed,
    has_content,
    identity,
    in_time,
    locator,
    model_calls,
    succeeded,
    turns,
    usage,
)
from gym_metrics.recording import canonical_trajectory

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


@dataclass(slots=True)
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


class _Rollout:
    """One rollout's evidence, each part read once (the rules share it)."""

    __slots__ = ("record", "t", "calls", "usage", "_turns", "_chains")

    def __init__(self, record: Mapping[str, Any], t: Mapping[str, Any], calls: list[dict[str, Any]], use: tuple[int, int, bool]) -> None:
        self.record, self.t, self.calls, self.usage = record, t, calls, use
        self._turns: list[tuple[dict[str, Any], bool, bool, bool]] | None = None
        self._chains: dict[Any, list[dict[str, Any]]] | None = None

    def turns(self) -> list[tuple[dict[str, Any], bool, bool, bool]]:
        if self._turns is None:
            self._turns = turns(self.t)
        return self._turns

    def chains(self) -> dict[Any, list[dict[str, Any]]]:
        if self._chains is None:  # kept only once made: a failure raises again where NeMo Gym's does
            self._chains = chains(self.calls)
        return self._chains


def _ended(r: _Rollout) -> list[dict[str, Any]]:
    out = []
    for key, chain in r.chains().items():
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


def _token_mismatch(r: _Rollout, bound: Bindings) -> list[dict[str, Any]]:
    prompt, completion, present = r.usage
    captured = sum(count_of(c, "tokens_in") for c in bound.matched), sum(count_of(c, "tokens_out") for c in bound.matched)
    if present and (prompt, completion) != captured:
        return [finding("rollout_token_count_mismatch", {"transcript_prompt": prompt, "transcript_completion": completion,
                                                         "capture_prompt": captured[0], "capture_completion": captured[1]})]  # fmt: skip
    return []


Check = Callable[[_Rollout, Bindings], list[dict[str, Any]]]
_RULES: dict[str, Check] = {
    "rollout_missing_agent_turns": lambda r, b: [] if any(s or c or ref for _, s, c, ref in r.turns())
    else [finding("rollout_missing_agent_turns", {"reason": "no agent turn with model activity"})],
    "rollout_ended_on_failed_model_call": lambda r, b: _ended(r),
    "agent_turn_hollow": lambda r, b: [finding("agent_turn_hollow", {"reason": "agent turn has no message or tool calls"}, loc)
                                        for loc, said, called, _ in r.turns() if not said and not called],
    "model_call_zero_completion_tokens": lambda r, b: [finding("model_call_zero_completion_tokens", {"completion_tokens": 0}, locator(c, n))
                                                        for n, c in enumerate(b.matched) if c.get("tokens_out") == 0],
    "model_call_missing_token_counts": lambda r, b: [
        finding("model_call_missing_token_counts", {"missing": [f for f, k in (("prompt_tokens", "tokens_in"), ("completion_tokens", "tokens_out")) if c.get(k) is None]},
                locator(c, n)) for n, c in enumerate(b.matched) if c.get("tokens_in") is None or c.get("tokens_out") is None],
    "trajectory_capture_mismatch": lambda r, b: _mismatch(r.t, b),
    "model_call_failed": lambda r, b: _call_failed(b),
    "rollout_token_count_mismatch": _token_mismatch,
    "model_call_runaway_generation": lambda r, b: [
        finding("model_call_runaway_generation", {"finish_reason": c.get("finish_reason")}, locator(c, n))
        for n, c in enumerate(b.matched) if c.get("finish_reason") in _AT_LENGTH and not has_content(c.get("response"))],
}  # fmt: skip


@dataclass(frozen=True)
class _Plan:
    """What the checks not ignored do, worked out once per set of ignored checks."""

    record_unreadable: bool
    unreadable: tuple[str, ...]
    """Unobserved when the line is not a record (every check but record_unreadable)."""
    no_trajectory: tuple[str, ...]
    """Unobserved without a usable trajectory (the checks that read one)."""
    steps: tuple[tuple[str, Check, bool, bool, str | None], ...]
    """The checks that read a trajectory: (id, rule, reads turns, reads observed calls, bound calls read)."""
    execution_error: bool


@lru_cache(maxsize=64)
def _plan(ignored: frozenset[str]) -> _Plan:
    active = [c for c in ROLLOUT_CHECKS if c not in ignored]
    reading = [c for c in active if TRAJECTORY in ROLLOUT_CHECKS[c]]
    steps = tuple((c, _RULES[c], TURNS in ROLLOUT_CHECKS[c], OBSERVED in ROLLOUT_CHECKS[c],
                   OWNED if OWNED in ROLLOUT_CHECKS[c] else BOUND if BOUND in ROLLOUT_CHECKS[c] else None) for c in reading)  # fmt: skip
    return _Plan("record_unreadable" in active, tuple(c for c in active if c != "record_unreadable"), tuple(reading), steps,
                 "check_execution_error" not in ignored)  # fmt: skip


def _index(value: Any, key: str, where: tuple[str, int, int, int]) -> int | str:
    """A task, rollout or stage index as NeMo Gym types it (an int or a string; a whole float or
    a bool is that int); anything else is refused naming the line (NeMo Gym's run fails too)."""
    if type(value) is int or type(value) is str:
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**64:
        return int(value)
    raise ValueError(f"{where[0]} line {where[2]}: {key} is {value!r}, not an integer or a string")


def check_rollout(record: dict[str, Any], parse_error: str | None, where: tuple[str, int, int, int], ignored: frozenset[str]) -> Digest:
    """One rollout's digest. `where`: its file, the file's position in the run, its line
    number and its position among the run's readable lines."""
    path, source, line, ordinal = where
    plan = _plan(ignored)
    task, rollout = record.get(TASK, f"__unreadable_record__:input-{source}:line-{line}" if parse_error else ordinal), record.get(ROLLOUT, 0)
    raw = record.get("ng_trajectory")
    rollout_id = str(record.get("_ng_rollout_id") or (raw.get("rollout_id") if isinstance(raw, dict) else None) or f"{task}-{rollout}")
    task, rollout = _index(task, TASK, where), _index(rollout, ROLLOUT, where)
    stage = record.get("stage_index")
    stage = None if stage is None else _index(stage, "stage_index", where)
    use = usage(record)
    if parse_error:
        found = [finding("record_unreadable", {"reason": "rollout record is unreadable", "error": parse_error}, {"source_file": path, "line": line})]
        return Digest(task, rollout, stage, rollout_id, found if plan.record_unreadable else [], list(plan.unreadable), usage_prompt=use[0], usage_completion=use[1])
    t, bad_trajectory = canonical_trajectory(raw) if raw is not None else (None, None)
    gaps = Gaps(t["gaps"] if t is not None else [])
    if t is None or gaps.has(("trajectory_projection_failed",)):
        found = [finding("record_unreadable", {"reason": "canonical trajectory is unreadable", "error": bad_trajectory})] if bad_trajectory and plan.record_unreadable else []
        return Digest(task, rollout, stage, rollout_id, found, list(plan.no_trajectory), usage_prompt=use[0], usage_completion=use[1])
    turns_seen = not gaps.has(("turns_unavailable",))
    scope_complete = not gaps.has(("turn_model_call_scope_incomplete",))
    calls_seen = not gaps.has(CALLS_INCOMPLETE)
    calls = model_calls(t)
    turn_bound, owned = bindings(t, calls)
    evidence = _Rollout(record, t, calls, use)
    findings, unobserved = _findings(evidence, plan, gaps, turns_seen, scope_complete, calls_seen, turn_bound, owned)
    errors, statuses, duplicated, captured_in, captured_out = _tally(calls)
    return Digest(
        task, rollout, stage, rollout_id, findings, unobserved, bool(calls), scope_complete and turn_bound.complete, len(calls),
        sum(succeeded(c) for c in turn_bound.matched), errors, statuses,
        bool(calls) and any(ended_on_failure(chain) for chain in evidence.chains().values()),
        duplicated, use[0], use[1], captured_in, captured_out,
    )  # fmt: skip


def _tally(calls: list[dict[str, Any]]) -> tuple[int, dict[str, int], int, int, int]:
    """The calls' failures, failures by status, replayed calls and token counts, in one pass."""
    errors, duplicated, captured_in, captured_out = 0, 0, 0, 0
    statuses: dict[str, int] = {}
    seen: set[str] = set()
    for c in calls:
        if failed(c):
            errors += 1
            status = str(c.get("status_code") if c.get("status_code") is not None else "unknown")
            statuses[status] = statuses.get(status, 0) + 1
        if (i := identity(c)) is not None:
            if i in seen:
                duplicated += 1
            seen.add(i)
        captured_in += count_of(c, "tokens_in")
        captured_out += count_of(c, "tokens_out")
    return errors, statuses, duplicated, captured_in, captured_out


def _findings(r: _Rollout, plan: _Plan, gaps: Gaps, turns_seen: bool, scope_complete: bool, calls_seen: bool,
              turn_bound: Bindings, owned: Bindings) -> tuple[list[dict[str, Any]], list[str]]:  # fmt: skip
    """The checks that read an observed trajectory, in order: each unobserved without its
    evidence, else its rule's findings (a rule that raises: unobserved, and a finding)."""
    findings: list[dict[str, Any]] = []
    unobserved: list[str] = []
    for check, rule, reads_turns, reads_observed, reads_bound in plan.steps:
        if (reads_turns and not turns_seen) or (reads_observed and not (calls_seen and r.calls)):
            unobserved.append(check)
            continue
        bound = owned if reads_bound is OWNED else turn_bound
        if reads_bound is not None:
            enough = (bool(bound.references) or gaps.has(_CONTRADICTIONS)) if check == "trajectory_capture_mismatch" else bool(bound.matched)
            if not calls_seen or not enough:
                unobserved.append(check)
                continue
        if check == "rollout_token_count_mismatch" and (
            not scope_complete or not bound.complete or not bound.matched or not r.usage[2]
            or any(c.get("tokens_in") is None or c.get("tokens_out") is None for c in bound.matched)
        ):  # fmt: skip
            unobserved.append(check)
            continue
        if check == "model_call_runaway_generation" and any(c.get("finish_reason") in _AT_LENGTH and c.get("response") is None for c in bound.matched):
            unobserved.append(check)
            continue
        try:
            findings.extend(rule(r, bound))
        except Exception as exc:  # a check's own failure is a finding, not a crash of the run
            unobserved.append(check)
            if plan.execution_error:
                findings.append(finding("check_execution_error", {"reason": "check raised an unexpected exception", "failed_check": check, "error": type(exc).__name__}))
    return findings, unobserved
