"""The merge's group_level_metrics, rendered a range of tasks at a time: each range's stats,
samples and rollout_infos are made from the measured rows just before the range is written,
so no table of every task's stats exists (at 10M rollouts that table and its temporaries were
most of the merge's memory). The bytes are the one-process writer's (_output): the same
functions render each range, cut on its own chunk boundaries.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np

from gym_metrics.aggregate.render import _output
from gym_metrics.rollouts import NumericField, RolloutColumns, RowSource, ShownField
from gym_metrics.aggregate.render._forked import discard, render_workers, start
from gym_metrics.aggregate._groups import stat_columns
from gym_metrics.aggregate.render._output import iter_group_json
from gym_metrics.aggregate.shards._ranged_stats import Tasks
from gym_metrics.aggregate._rows import sample_texts
from gym_metrics.aggregate._stats import GroupedStats, grouped_stats
from gym_metrics.aggregate._tables import GroupTable, RolloutInfoTable

RANGE_ROWS = 1 << 18
"""Rollouts per rendered range, about (whole chunks of groups; a range's stats, infos and
text are made at once)."""


@dataclass
class GroupSource:
    """What the groups are made of: the measured rows sorted by key and their tasks."""

    groups: GroupTable
    """Every group's task, num_rollouts and expected_num_rollouts (no stats, no samples)."""
    cols: RolloutColumns
    names: list[str]
    valid: dict[str, np.ndarray]
    tasks: Tasks
    measured: np.ndarray
    """Each measured task's index (ascending)."""
    shown: dict[str, ShownField]
    sample_rows: RowSource | None
    """The row texts of each measured task's first row (its sample), when the partials have texts."""
    samples: bool
    infos: bool
    whole: dict[str, GroupedStats] = field(default_factory=dict)
    """Fields whose group stats were computed over all rows (a sum overflowed: _ranged_stats)."""

    def table(self, lo: int, hi: int) -> GroupTable:
        """Groups lo..hi as a table of their own, with their stats, samples and infos."""
        final = self.groups.task_index[lo:hi]
        measured = self.measured
        g, h = int(np.searchsorted(measured, final[0])), int(np.searchsorted(measured, final[-1], side="right"))
        here = None if h - g == hi - lo else np.isin(final, measured[g:h], assume_unique=True)
        n_rows = len(self.cols)
        a = int(self.tasks.starts[g]) if g < len(measured) else n_rows
        b = int(self.tasks.starts[h]) if h < len(measured) else n_rows
        stats = stat_columns({k: self._stats(k, g, h, a, b) for k in self.names}, self.names, self.tasks.sizes[g:h])
        if here is not None:
            stats = {k: _placed(v, here) for k, v in stats.items()}
        sub = GroupTable(final, stats, self.groups.num_rollouts[lo:hi], self.groups.expected_num_rollouts[lo:hi], [None] * (hi - lo))
        if self.samples:
            first = np.arange(h - g)
            sub.defer_samples(first if here is None else _placed(first, here, -1), self._sampler(g, h))
        if self.infos:
            fields = {k: _rows_of(self.cols.fields[k], a, b) for k in self.names}
            shown = {k: ShownField(s.values[a:b], s.present[a:b], s.ints[a:b], s.text[a:b] if s.text is not None else None)
                     for k, s in self.shown.items()}  # fmt: skip
            keys = self.cols.task_index[a:b].astype(np.int64), self.cols.rollout_index[a:b].astype(np.int64)
            sub.attach(RolloutInfoTable(*keys, fields, shown))
        return sub

    def _sampler(self, g: int, h: int) -> Callable[[np.ndarray], list[bytes]]:
        """Samples of measured tasks g..h by their number from g: `sample_texts` of their first
        rows, taken into columns of their own (the same texts as from every row's columns)."""
        at = self.tasks.starts[g:h]
        rows = self.sample_rows.take(np.arange(g, h)) if self.sample_rows is not None else None
        firsts = RolloutColumns(self.cols.task_index[at].astype(np.int64), self.cols.rollout_index[at].astype(np.int64),
                                {k: self.cols.fields[k].take(at) for k in self.names}, np.zeros(h - g, bool), rows=rows)  # fmt: skip
        names = self.names
        return lambda pos: sample_texts(firsts, pos.tolist(), names)

    def _stats(self, name: str, g: int, h: int, a: int, b: int) -> GroupedStats:
        whole = self.whole.get(name)
        if whole is not None:
            s = slice(g, h)
            return GroupedStats(whole.count[s], whole.mean[s], whole.min[s], whole.max[s], whole.median[s], whole.std[s], {},
                                whole.starts[s], whole.total[s], whole.m2[s])  # fmt: skip
        ids, starts = self.tasks.local(g, h)
        return grouped_stats(self.cols.fields[name].values[a:b], self.valid[name][a:b], ids, starts)

    def bounds(self) -> list[int]:
        """Range bounds over the groups: whole chunks of the writer (_output), about
        RANGE_ROWS rollouts each."""
        n, chunk = len(self.groups), _output.CHUNK
        cum = np.concatenate(([0], np.cumsum(self.groups.num_rollouts)))
        edges = np.append(np.arange(0, n, chunk), n)
        out = [0]
        while out[-1] < n:
            j = int(np.searchsorted(edges, out[-1], side="right"))
            k = int(np.searchsorted(cum[edges], cum[out[-1]] + RANGE_ROWS, side="right")) - 1
            out.append(int(edges[max(j, k)]))
        return out


def _placed(values: np.ndarray, here: np.ndarray, fill: float = np.nan) -> np.ndarray:
    out = np.full(len(here), fill, dtype=values.dtype)
    out[here] = values
    return out


def _rows_of(col: NumericField, a: int, b: int) -> NumericField:
    return NumericField(col.values[a:b], col.present[a:b], col.kind)


class RangedRender:
    """The GroupsWriter (_output) of a GroupSource: the first ranges rendered by the writer,
    the later ones by forked workers started when this is made."""

    def __init__(self, source: GroupSource, tmp_dir: Path) -> None:
        self.groups = source.groups
        self.source = source
        self._bounds = np.asarray(source.bounds(), dtype=np.int64)
        self._ranges = self._split()
        self._workers = start(tmp_dir, self._ranges[1:], self._render, _output.GROUP_SEP)
        weakref.finalize(self, discard, self._workers)

    def _split(self) -> list[tuple[int, int]]:
        """One contiguous run of ranges per render process, by rollouts (see _output._ranges)."""
        n = len(self.groups)
        cum = np.concatenate(([0], np.cumsum(self.groups.num_rollouts)))
        workers = render_workers(int(cum[-1]))
        if workers == 1 or len(self._bounds) <= 2:
            return [(0, n)] if n else []
        shares = np.cumsum([_output.WRITER_SHARE] + [1.0] * (workers - 1))
        at = cum[self._bounds]
        cuts = [int(self._bounds[min(int(np.searchsorted(at, t)), len(at) - 1)]) for t in cum[-1] * shares[:-1] / shares[-1]]
        bounds = sorted({0, n, *cuts})
        return list(zip(bounds[:-1], bounds[1:]))

    def _render(self, lo: int, hi: int) -> Iterator[bytes]:
        cuts = self._bounds[(self._bounds > lo) & (self._bounds < hi)].tolist()
        for a, b in zip([lo, *cuts], [*cuts, hi]):
            yield from iter_group_json(self.source.table(a, b), 0, b - a)

    def write(self, f: IO[bytes]) -> None:
        if len(self.groups):
            _output.write_ranges(f, self._ranges, self._workers, self._render)


__all__ = ["GroupSource", "RANGE_ROWS", "RangedRender"]
