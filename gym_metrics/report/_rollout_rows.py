"""Read a bounded sample of a rollouts file for the report's Rollouts section: the first
ROLLOUTS_PER_TASK rollouts of the first MAX_TASKS tasks, from at most MAX_READ_BYTES of the file.

The file is read line by line from its start and each kept row is turned into an EpisodeView (what
the page shows) at once, so neither a huge file nor a huge row makes the report slow or big:
reading stops at the byte budget, and the page says what was left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gym_metrics._util.jsonio import loads
from gym_metrics.errors import InvalidInputError
from gym_metrics.report._episode import EpisodeView, episode
from gym_metrics.rollouts import ROLLOUT_KEY_ALIASES, TASK_KEY_ALIASES, agent_name, row_index_value

MAX_READ_BYTES = 4_000_000
"""At most this much of the rollouts file is read for the Rollouts section."""
ROLLOUTS_PER_TASK = 8
"""Rollouts shown per task (the first ones in the file)."""
MAX_TASKS = 100
"""Tasks shown, over all agents (the first ones in the file)."""


@dataclass
class Shown:
    """One rollout as the page shows it."""

    rollout: int
    value: float | None
    """The drawn field's value (None: absent or not a number)."""
    tokens: float | None
    episode: EpisodeView


@dataclass
class RolloutSample:
    """The rollouts shown, per agent (its name in the metrics file) and task, in file order."""

    path: Path
    tasks: dict[str, dict[int, list[Shown]]] = field(default_factory=dict)
    seen: dict[tuple[str, int], int] = field(default_factory=dict)
    """Rows read per (agent, task), shown or not."""
    bytes_read: int = 0
    stopped_early: bool = False
    """Reading stopped at MAX_READ_BYTES (or on a row longer than what was left of it)."""
    tasks_left_out: bool = False
    """Rows of tasks past MAX_TASKS were read and left out."""
    skipped: int = 0
    """Lines that are not rollout rows (bad JSON, no task or rollout index, an unknown agent)."""

    def count(self) -> int:
        return sum(len(rows) for tasks in self.tasks.values() for rows in tasks.values())


def read_sample(path: Path, agents: Sequence[str], value_field: str = "reward", max_bytes: int | None = None) -> RolloutSample:
    """The sample of `path` for the metrics file's `agents` (a row naming no agent belongs to
    the only agent, if there is one), from at most `max_bytes` (default MAX_READ_BYTES)."""
    sample = RolloutSample(path)
    max_bytes = MAX_READ_BYTES if max_bytes is None else max_bytes
    known = set(agents)
    default = agents[0] if len(agents) == 1 else None
    try:
        f = path.open("rb")
    except OSError as exc:
        raise InvalidInputError(f"{path}: cannot read the rollouts file ({exc.strerror})") from None
    with f:
        while True:
            line = f.readline(max_bytes - sample.bytes_read + 1)
            if not line:
                break
            if sample.bytes_read + len(line) > max_bytes:
                sample.stopped_early = True
                break
            sample.bytes_read += len(line)
            if line.strip():
                _add(sample, line, known, default, value_field)
            if sample.tasks_left_out and _all_full(sample):
                sample.stopped_early = f.read(1) != b""
                break
    return sample


def _add(sample: RolloutSample, line: bytes, known: set[str], default: str | None, value_field: str) -> None:
    try:
        row = loads(line)  # as Python's json reads it (NaN, Infinity), as aggregate reads the file
        if not isinstance(row, dict):
            raise ValueError
        task, rollout = row_index_value(row, TASK_KEY_ALIASES), row_index_value(row, ROLLOUT_KEY_ALIASES)
    except (ValueError, InvalidInputError):  # JSONDecodeError is a ValueError
        sample.skipped += 1
        return
    agent = agent_name(row) or default
    if agent is None or agent not in known:
        sample.skipped += 1
        return
    key = (agent, task)
    sample.seen[key] = sample.seen.get(key, 0) + 1
    tasks = sample.tasks.setdefault(agent, {})
    if task not in tasks and sum(map(len, sample.tasks.values())) >= MAX_TASKS:
        sample.tasks_left_out = True
        return
    shown = tasks.setdefault(task, [])
    if len(shown) < ROLLOUTS_PER_TASK:
        shown.append(Shown(rollout, _number(row.get(value_field)), _tokens(row.get("response")), episode(row)))


def _all_full(sample: RolloutSample) -> bool:
    return all(len(rows) >= ROLLOUTS_PER_TASK for tasks in sample.tasks.values() for rows in tasks.values())


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _tokens(response: Any) -> float | None:
    usage = response.get("usage") if isinstance(response, Mapping) else None
    return _number(usage.get("total_tokens")) if isinstance(usage, Mapping) else None
