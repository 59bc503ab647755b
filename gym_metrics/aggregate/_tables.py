"""The engine's result model: per-task groups and per-rollout infos in columns, one agent's
aggregate. Results that arrive in parts (AggregateMetrics answers) are joined here too."""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any

import numpy as np

from gym_metrics.rollouts import NumericField, ShownField, concat_shown, shown_of_field


@dataclass
class RolloutInfoTable:
    """Measured rollouts sorted by (task, rollout), with their numeric fields."""

    task_index: np.ndarray
    rollout_index: np.ndarray
    fields: dict[str, NumericField]
    shown: dict[str, ShownField] = field(default_factory=dict)
    """Fields whose rollout_infos are not read off `fields` (see _shown): what they show."""

    def __len__(self) -> int:
        return len(self.task_index)

    @staticmethod
    def concat(tables: list[RolloutInfoTable]) -> RolloutInfoTable:
        """One table of these, in order; a field some lack is absent in their rows."""
        fields = {}
        for name in sorted({name for t in tables for name in t.fields}):
            parts = [t.fields.get(name) or NumericField(np.full(len(t), np.nan), np.zeros(len(t), bool)) for t in tables]
            fields[name] = NumericField(
                np.concatenate([p.values for p in parts]), np.concatenate([p.present for p in parts]), parts[0].kind
            )
        shown = {
            name: concat_shown([t.shown.get(name) or shown_of_field(t.fields.get(name), len(t)) for t in tables])
            for name in sorted({name for t in tables for name in t.shown})
        }
        return RolloutInfoTable(
            np.concatenate([t.task_index for t in tables]), np.concatenate([t.rollout_index for t in tables]), fields, shown
        )


@dataclass
class GroupTable:
    """group_level_metrics in columns: position i is task task_index[i], ascending."""

    task_index: np.ndarray
    stats: dict[str, np.ndarray]
    """Keyed "<stat>/<field>", in output order; NaN where the task has no such stat."""
    num_rollouts: np.ndarray
    expected_num_rollouts: np.ndarray
    samples: list[bytes | None]
    """Each task's first measured row without its indices, as JSON text (a million-row run
    keeps 20 MB of text instead of 150 MB of dicts)."""
    custom: list[dict[str, Any] | None] | None = None
    """Per-task entries merged from compute_metrics' per_task_metrics."""
    rollout_infos: RolloutInfoTable | None = None
    info_starts: np.ndarray | None = None
    """Where each task's rollouts start in rollout_infos (length = tasks + 1)."""
    _deferred: tuple[np.ndarray, Callable[[np.ndarray], list[bytes]]] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.task_index)

    def defer_samples(self, rows: np.ndarray, render: Callable[[np.ndarray], list[bytes]]) -> None:
        """Make the samples when they are read (`samples_at`), not now: per group the position
        of its sample's row (-1: none) and how to render rows. Rendering a million samples is
        the engine's costliest loop; deferred, the forked renderers each make their own."""
        self._deferred = (rows.copy(), render)

    def samples_at(self, lo: int = 0, hi: int | None = None) -> list[bytes | None]:
        """The samples of groups lo..hi, made now where deferred (a sample set meanwhile stays)."""
        hi = len(self) if hi is None else hi
        if self._deferred is not None:
            rows, render = self._deferred
            todo = lo + np.flatnonzero(rows[lo:hi] >= 0)
            todo = todo[[self.samples[i] is None for i in todo.tolist()]] if len(todo) else todo
            for i, text in zip(todo.tolist(), render(rows[todo])):
                self.samples[i] = text
            rows[lo:hi] = -1
        return self.samples[lo:hi]

    @staticmethod
    def concat(tables: list[GroupTable]) -> GroupTable:
        """The groups of consecutive task ranges as one table (the parts of an answer)."""
        keys = list(tables[0].stats)
        out = GroupTable(
            task_index=np.concatenate([t.task_index for t in tables]),
            stats={k: np.concatenate([t.stats.get(k, np.full(len(t), np.nan)) for t in tables]) for k in keys},
            num_rollouts=np.concatenate([t.num_rollouts for t in tables]),
            expected_num_rollouts=np.concatenate([t.expected_num_rollouts for t in tables]),
            samples=[s for t in tables for s in t.samples_at()],
            custom=None
            if all(t.custom is None for t in tables)
            else [c for t in tables for c in (t.custom if t.custom is not None else [None] * len(t))],
        )
        infos = [t.rollout_infos for t in tables]
        if all(i is not None for i in infos):
            out.attach(RolloutInfoTable.concat([i for i in infos if i is not None]))
        return out

    def attach(self, table: RolloutInfoTable) -> None:
        """Set the rollout_infos and where each group's rollouts start in them (groups may
        have none)."""
        self.rollout_infos = table
        self.info_starts = np.concatenate(([0], np.cumsum(self.num_rollouts))).astype(np.int64)


@dataclass
class AgentAggregate:
    """The aggregate metrics of one agent (docs/metrics.md#output-file entry)."""

    agent_name: str
    agent_metrics: dict[str, Any]
    key_metrics: dict[str, Any]
    groups: GroupTable
    repeat_level_metrics: list[dict[str, Any]]
    non_finite_counts: dict[str, int] = field(default_factory=dict)
    received_rollouts: int = 0
    non_numeric_counts: dict[str, int] = field(default_factory=dict)
    """Per numeric field, the measured rows holding it as a string, object or list: data, kept
    out of the field's stats ("1.0" is not converted) and counted rather than lost silently."""
    prerender: Any = field(default=None, repr=False, compare=False)
    """The group rendering begun for the output file, if any (aggregate_file starts it)."""


__all__ = ["AgentAggregate", "GroupTable", "RolloutInfoTable"]
