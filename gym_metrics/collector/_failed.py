"""Agents none of whose rollouts was verified, and why (collect's exit code 3)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

from gym_metrics.collector._outfile import sidecar_key
from gym_metrics.rollouts import ERROR_KINDS, RolloutColumns


@dataclass(frozen=True)
class FailedAgent:
    """An agent none of whose rollouts was verified: a broken environment or input, not a
    score (the command exits 3)."""

    agent: str
    rollouts: int
    by_kind: dict[str, int]
    dropped: bool = False
    """Every rollout in the failures sidecar (by its `_ng_failure_class`), none in the output."""


def all_failed(agent: str, cols: RolloutColumns) -> FailedAgent | None:
    """The agent's failure counts by kind when it has rollouts and every one failed."""
    errors = cols.errors
    if len(cols) == 0 or errors is None or not errors.all():
        return None
    codes = np.bincount(errors, minlength=len(ERROR_KINDS) + 1)
    return FailedAgent(agent, len(cols), {kind: int(codes[i + 1]) for i, kind in enumerate(ERROR_KINDS) if codes[i + 1]})


def all_dropped(agents: Iterable[str], sidecar: Path, default_agent: str | None) -> list[FailedAgent]:
    """The agents of `agents` (ones with no row in the output) whose rollouts the failures
    sidecar holds, by failure class: each rollout counted once, by its last attempt."""
    wanted = set(agents)
    if not wanted or not sidecar.exists():
        return []
    last: dict[str, dict[tuple[int, int], str]] = {}
    with sidecar.open("rb") as f:
        for line in f:
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            key = sidecar_key(row, default_agent)
            if key is not None and key[0] in wanted:
                last.setdefault(key[0], {})[key[1:]] = str(row.get("_ng_failure_class"))
    return [FailedAgent(agent, len(kinds), dict(Counter(kinds.values())), dropped=True) for agent, kinds in sorted(last.items())]


def with_generation_failures(failed: FailedAgent, generation: int) -> FailedAgent:
    """The engine codes a `generation` failure as verify_failed (its kinds are the verify
    ones): this run's generation failures are moved to a kind of their own for the report."""
    moved = min(generation, failed.by_kind.get("verify_failed", 0))
    if not moved:
        return failed
    kinds = {**failed.by_kind, "verify_failed": failed.by_kind["verify_failed"] - moved, "generation": moved}
    return FailedAgent(failed.agent, failed.rollouts, {k: n for k, n in kinds.items() if n})


__all__ = ["FailedAgent", "all_dropped", "all_failed", "with_generation_failures"]
