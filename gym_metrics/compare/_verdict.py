"""PASS / FAIL / INCONCLUSIVE for CI gating, decided by where a difference's confidence
interval lies relative to a margin (docs/statistics.md, "Verdicts"), and the gate that applies
them to a comparison report.

A point estimate alone would flip with noise; a bare significance test cannot say "no worse
than". Comparing the interval of A - B to a margin does both: the verdict is FAIL or PASS only
when the data settle the question at the interval's confidence, and INCONCLUSIVE (never a
silent PASS) when they do not.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from typing import Any

from gym_metrics.compare._method import get_method
from gym_metrics.compare._result import ComparisonReport
from gym_metrics.errors import ExitCode

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"
NO_INTERVAL = "no interval (every task differs by the same amount: no spread to measure)"
EXIT_CODES = {PASS: ExitCode.OK, FAIL: ExitCode.FAILED, INCONCLUSIVE: ExitCode.INCONCLUSIVE}
"""The command-line exit code of each verdict (DESIGN "Command-line conventions")."""


@dataclass(frozen=True)
class Check:
    """One gate on one comparison's A - B interval [low, high]."""

    rule: str
    """"fail-if-worse-by" or "require-better-by"."""
    margin: float
    comparison: str
    """Which difference, e.g. "mean_reward(reward): new - old"."""
    status: str
    reason: str


def _minus(delta: float) -> str:
    """-delta as the reasons write it (0, not -0)."""
    return f"{-delta:g}" if delta else "0"


def _bounds(low: float, high: float, edge: float) -> str:
    """`[low, high]` with the digits that tell each bound from the margin `edge` (at 4 decimals
    -0.04997 read -0.0500, beside a margin of -0.05 it cleared)."""
    digits = 4
    while digits < 12 and any(x != edge and round(x, digits) == round(edge, digits) for x in (low, high)):
        digits += 1
    return f"[{low:+.{digits}f}, {high:+.{digits}f}]"


def fail_if_worse_by(delta: float, low: float, high: float, comparison: str, candidate: str = "A") -> Check:
    """Non-inferiority with margin delta: FAIL when high < -delta (A is worse than B by more than
    delta, beyond doubt), PASS when low > -delta (a loss of delta or more is ruled out), else
    INCONCLUSIVE (the interval holds -delta, or there is none)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return Check("fail-if-worse-by", delta, comparison, INCONCLUSIVE, f"{NO_INTERVAL}: cannot tell whether {candidate} is worse by {delta:g}")
    bounds = _bounds(low, high, -delta)
    if high < -delta:
        status, reason = FAIL, f"worse by more than {delta:g}: the interval {bounds} lies below {_minus(delta)}"
    elif low > -delta:
        status, reason = PASS, f"not worse by {delta:g} or more: the interval {bounds} lies above {_minus(delta)}"
    else:
        status, reason = INCONCLUSIVE, f"the interval {bounds} contains {_minus(delta)}: cannot tell whether {candidate} is worse by {delta:g}"
    return Check("fail-if-worse-by", delta, comparison, status, reason)


def require_better_by(delta: float, low: float, high: float, comparison: str, candidate: str = "A") -> Check:
    """Superiority with margin delta: PASS when low > delta (A beats B by more than delta beyond
    doubt), FAIL when high < delta (a gain of delta is ruled out), else INCONCLUSIVE."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return Check("require-better-by", delta, comparison, INCONCLUSIVE, f"{NO_INTERVAL}: cannot tell whether {candidate} is better by {delta:g}")
    bounds = _bounds(low, high, delta)
    if low > delta:
        status, reason = PASS, f"better by more than {delta:g}: the interval {bounds} lies above {delta:g}"
    elif high < delta:
        status, reason = FAIL, f"not better by {delta:g}: the interval {bounds} lies below {delta:g}"
    else:
        status, reason = INCONCLUSIVE, f"the interval {bounds} contains {delta:g}: cannot tell whether {candidate} is better by {delta:g}"
    return Check("require-better-by", delta, comparison, status, reason)


@dataclass(frozen=True)
class Verdict:
    """The overall verdict: FAIL if any check fails, PASS if every check passes, else INCONCLUSIVE."""

    status: str
    checks: list[Check] = field(default_factory=list)
    confidence: float = 0.95
    """The confidence of the intervals the checks used (Bonferroni-adjusted over the checks)."""

    @property
    def exit_code(self) -> int:
        return int(EXIT_CODES[self.status])

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "exit_code": self.exit_code, "confidence": self.confidence,
                "checks": [asdict(c) for c in self.checks]}  # fmt: skip


def combine(checks: list[Check], confidence: float) -> Verdict:
    """One verdict from several checks (several margins, agents or metrics)."""
    statuses = {c.status for c in checks}
    status = FAIL if FAIL in statuses else PASS if statuses == {PASS} else INCONCLUSIVE
    return Verdict(status, checks, confidence)


def gate(
    report: ComparisonReport,
    candidate: str,
    fail_if_worse_by_delta: float | None,
    require_better_by_delta: float | None,
    *,
    pairs: Collection[tuple[str, str]] | None = None,
) -> Verdict | None:
    """The verdict on every comparison of `candidate` (the first agent) against the others, or
    on the comparisons (A, B) in `pairs` when given (the report's --compare: each agent of the
    file against its counterpart in the other); None without a rule.

    With m gated comparisons and checks, each interval is at confidence 1 - alpha / m
    (Bonferroni), so the chance that any check is decided wrongly stays at most alpha; with one
    comparison it is the report's own interval. The report's method supplies the intervals
    (`CompareMethod.verdict_interval`); one whose interval is fixed (the bootstrap's) uses it
    as it is."""
    deltas = [(fail_if_worse_by, fail_if_worse_by_delta), (require_better_by, require_better_by_delta)]
    rules = [(rule, d) for rule, d in deltas if d is not None]
    if not rules:
        return None
    if pairs is None:
        gated = [c for c in report.comparisons if c.agent_a == candidate]  # pairs keep the order named
    else:
        gated = [c for c in report.comparisons if (c.agent_a, c.agent_b) in pairs]
    if not gated:
        return None
    method = get_method(report.method_name)
    m = len(gated) * len(rules)
    confidence = method.verdict_confidence(report, m)
    checks: list[Check] = []
    for c in gated:
        low, high = method.verdict_interval(c, confidence, m)
        checks += [rule(delta, low, high, c.name, c.agent_a) for rule, delta in rules]
    return combine(checks, confidence)
