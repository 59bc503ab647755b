"""Agents none of whose rollouts was verified, and why (collect's exit code 3)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gym_metrics.rollouts import ERROR_KINDS, RolloutColumns


@dataclass(frozen=True)
class FailedAgent:
    """An agent none of whose rollouts was verified: a broken environment or input, not a
    score (the command exits 3)."""

    agent: str
    rollouts: int
    by_kind: dict[str, int]


def all_failed(agent: str, cols: RolloutColumns) -> FailedAgent | None:
    """The agent's failure counts by kind when it has rollouts and every one failed."""
    errors = cols.errors
    if len(cols) == 0 or errors is None or not errors.all():
        return None
    codes = np.bincount(errors, minlength=len(ERROR_KINDS) + 1)
    return FailedAgent(agent, len(cols), {kind: int(codes[i + 1]) for i, kind in enumerate(ERROR_KINDS) if codes[i + 1]})


def with_generation_failures(failed: FailedAgent, generation: int) -> FailedAgent:
    """The engine codes a `generation` failure as verify_failed (its kinds are the verify
    ones): this run's generation failures are moved to a kind of their own for the report."""
    moved = min(generation, failed.by_kind.get("verify_failed", 0))
    if not moved:
        return failed
    kinds = {**failed.by_kind, "verify_failed": failed.by_kind["verify_failed"] - moved, "generation": moved}
    return FailedAgent(failed.agent, failed.rollouts, {k: n for k, n in kinds.items() if n})


__all__ = ["FailedAgent", "all_failed", "with_generation_failures"]
