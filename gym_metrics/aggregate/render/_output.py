"""Write `<stem>_aggregate_metrics.json` (docs/metrics.md#output-file), streaming group by group.

Groups are serialised in chunks so a million rollout_infos never exist as dicts at once.
Agents are written sorted by name and every key order is fixed: the file is deterministic
byte for byte. Non-finite numbers are written as null (JSON has no NaN).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Protocol, cast, runtime_checkable

import numpy as np
import orjson

from gym_metrics._util.atomic import written_atomically
from gym_metrics._util.jsonio import loads
from gym_metrics.rollouts import ROLLOUT_KEY, TASK_KEY, ShownField, ValueKind
from gym_metrics.aggregate.render._writer import BackgroundWriter
from gym_metrics.aggregate.render._forked import Render, Worker, discard, finish, render_workers, start
from gym_metrics.aggregate._tables import AgentAggregate, GroupTable
from gym_metrics.aggregate.render._texts import Texts, choice, fill, joined, numbers, offsets

CHUNK = 4096
"""Groups rendered per blob; ranges given to render workers are cut on these boundaries."""
_OPTS = orjson.OPT_SERIALIZE_NUMPY


def output_path_for(rollouts_path: str | Path) -> Path:
    """`<stem>_aggregate_metrics.json` beside `<stem>.jsonl`."""
    p = Path(rollouts_path)
    return p.with_name(f"{p.stem}_aggregate_metrics.json")


Extra = Mapping[str, Mapping[str, Any]]
"""Per agent name, extra sections ({section name: JSON-able value}) written after
`non_finite_counts`, in the mapping's order (e.g. `{"alpha": {"economics": {...}}}`)."""


def write_aggregate_metrics(path: str | Path, aggregates: Iterable[AgentAggregate], extra: Extra | None = None) -> Path:
    """Write the file atomically (temp file + rename): a killed process never leaves half a
    file. No fsync: the file is derived data (re-run `aggregate`), and syncing 200 MB costs
    seconds."""
    path = Path(path)
    with written_atomically(path) as tmp, tmp.open("wb", buffering=0) as raw, BackgroundWriter(raw) as f:
        write_json(cast(IO[bytes], f), aggregates, extra)
    return path


def write_json(f: IO[bytes], aggregates: Iterable[AgentAggregate], extra: Extra | None = None) -> None:
    f.write(b"[")
    for i, agg in enumerate(sorted(aggregates, key=lambda a: a.agent_name)):
        f.write(b",\n" if i else b"\n")
        _write_agent(f, agg, (extra or {}).get(agg.agent_name, {}))
    f.write(b"\n]\n")


def _dump(value: Any, indent: bool = False) -> bytes:
    return orjson.dumps(value, option=_OPTS | (orjson.OPT_INDENT_2 if indent else 0))


def _indent(blob: bytes, spaces: int) -> bytes:
    return blob.replace(b"\n", b"\n" + b" " * spaces)


def _write_agent(f: IO[bytes], agg: AgentAggregate, extra: Mapping[str, Any] | None = None) -> None:
    f.write(b'  {\n    "agent_ref": ' + _dump({"name": agg.agent_name}))
    f.write(b',\n    "agent_metrics": ' + _indent(_dump(agg.agent_metrics, indent=True), 4))
    f.write(b',\n    "key_metrics": ' + _indent(_dump(agg.key_metrics, indent=True), 4))
    f.write(b',\n    "group_level_metrics": [')
    render = agg.prerender if isinstance(agg.prerender, GroupsWriter) else GroupsRender(agg.groups, _tmp_dir(f))
    render.write(f)
    f.write(b"\n    ]" if len(agg.groups) else b"]")
    f.write(b',\n    "repeat_level_metrics": [')
    for i, entry in enumerate(agg.repeat_level_metrics):
        f.write((b",\n      " if i else b"\n      ") + _dump(entry))
    f.write(b"\n    ]" if agg.repeat_level_metrics else b"]")
    f.write(b',\n    "non_numeric_counts": ' + _dump(agg.non_numeric_counts))
    f.write(b',\n    "non_finite_counts": ' + _dump(agg.non_finite_counts))
    for name, value in (extra or {}).items():
        f.write(b",\n    " + _dump(name) + b": " + _indent(_dump(value, indent=True), 4))
    f.write(b"\n  }")


@runtime_checkable
class GroupsWriter(Protocol):
    """What writes an agent's group_level_metrics entries (`AgentAggregate.prerender`): each
    entry after the first preceded by GROUP_SEP, the first by a newline and its indent."""

    def write(self, f: IO[bytes]) -> None: ...


class GroupsRender:
    """An agent's group_level_metrics: the first chunk and range rendered by the writer, the
    later ranges by forked workers (see _forked) started when this is made, possibly long
    before the file is written."""

    def __init__(self, groups: GroupTable, tmp_dir: Path) -> None:
        self.groups = groups
        self._ranges = _ranges(groups, min(CHUNK, len(groups)))
        self._workers = start(tmp_dir, self._ranges[1:], self._render, GROUP_SEP)
        weakref.finalize(self, discard, self._workers)  # never written: no stray processes or files

    def _render(self, lo: int, hi: int) -> Iterator[bytes]:
        return iter_group_json(self.groups, lo, hi)

    def write(self, f: IO[bytes]) -> None:
        if len(self.groups):  # the first chunk joins the writer's range
            first = (0, self._ranges[0][1] if self._ranges else len(self.groups))
            write_ranges(f, [first, *self._ranges[1:]], self._workers, self._render)


def write_ranges(f: IO[bytes], ranges: list[tuple[int, int]], workers: list[Worker | None], render: Render) -> None:
    """Ranges of entries in order, the first entry after a newline and indent, every later one
    after GROUP_SEP: range 0 rendered here, range k by workers[k - 1] (its bytes appended) or
    here when it has none or failed; workers not used are stopped."""
    sep = b"\n      "
    try:
        for k, (lo, hi) in enumerate(ranges):
            worker = workers[k - 1] if k else None
            if worker is None:
                for blob in render(lo, hi):
                    f.write(sep + blob)
                    sep = GROUP_SEP
            else:
                workers[k - 1] = None
                finish(f, worker, render, GROUP_SEP)
    finally:
        discard(workers)


WRITER_SHARE = 0.6
"""The writing process's range, against a worker's: it also has the agent level to finish, the
file's head to write and the workers' bytes to append (measured: the 2-process split that
ends both together at 1M rollouts)."""


def _ranges(groups: GroupTable, start: int) -> list[tuple[int, int]]:
    """Groups start.. cut on chunk boundaries into one range per render process (see _forked),
    by rollouts: the writer's range WRITER_SHARE of a worker's."""
    n = len(groups)
    weight = groups.info_starts if groups.info_starts is not None else np.arange(n + 1)
    workers = render_workers(int(weight[n] - weight[start])) if start < n else 1
    if workers == 1:
        return [(start, n)] if start < n else []
    shares = np.cumsum([WRITER_SHARE] + [1.0] * (workers - 1))
    targets = weight[start] + (weight[n] - weight[start]) * shares[:-1] / shares[-1]
    cuts = np.searchsorted(weight, targets)
    bounds = [start, *(start + -(-(int(c) - start) // CHUNK) * CHUNK for c in cuts), n]
    bounds = sorted({min(b, n) for b in bounds})
    return list(zip(bounds[:-1], bounds[1:]))


def _tmp_dir(f: IO[bytes]) -> Path:
    name = getattr(f, "name", None)
    return Path(name).parent if isinstance(name, str) else Path(".")


def iter_group_json(groups: GroupTable, start: int = 0, stop: int | None = None) -> Iterator[bytes]:
    """Compact JSON of consecutive tasks start..stop: each yielded blob holds one or more whole
    entries separated by the group separator; rollout_infos go last in each entry. Plain chunks
    (every stat defined, finite rollout values) are filled column-wise (see _texts) without a
    dict or a bytes object per task or rollout."""
    stop = len(groups) if stop is None else stop
    for lo in range(start, stop, CHUNK):
        hi = min(lo + CHUNK, stop)
        head = _head_parts(groups, lo, hi)
        blob = _filled(groups, lo, hi, head) if head is not None else None
        if blob is not None:
            yield blob
            continue
        heads = _heads(groups, lo, hi, head)
        if groups.rollout_infos is None:
            yield GROUP_SEP.join(h + b"}" for h in heads)
            continue
        dicts = _rollout_info_dicts(groups, lo, hi, fragments=True) or []
        yield GROUP_SEP.join(h + b',"rollout_infos":' + _dump(d) + b"}" for h, d in zip(heads, dicts))


Parts = tuple[list[bytes], list[Texts]]
"""A template's pieces and the columns filling it (one more piece than columns)."""


def _head_parts(groups: GroupTable, lo: int, hi: int) -> Parts | None:
    """Each entry of tasks lo..hi up to (without) rollout_infos and the closing brace, as a
    template; None unless every stat is defined and the tasks' custom metrics are columns
    (see _custom_columns)."""
    stat_keys = list(groups.stats)
    stats = [groups.stats[k][lo:hi] for k in stat_keys]
    if any(np.isnan(col).any() for col in stats):
        return None
    keys = [TASK_KEY, *stat_keys, "sample", "num_rollouts", "expected_num_rollouts"]
    keys += ["missing_num_rollouts", "reward_profile_completion_pct"]
    custom: tuple[list[str], list[np.ndarray]] = ([], [])
    if groups.custom is not None and any(groups.custom[lo:hi]):
        found = _custom_columns(groups.custom[lo:hi], {*keys, "rollout_infos"})
        if found is None:
            return None
        custom = found
    num = groups.num_rollouts[lo:hi]
    expected = groups.expected_num_rollouts[lo:hi]
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(expected == 0, 100.0, 100.0 * num / np.where(expected == 0, 1, expected))
    keys += custom[0]
    pieces = [b"{" + orjson.dumps(keys[0]) + b":", *(b"," + orjson.dumps(k) + b":" for k in keys[1:]), b""]
    samples = [x if isinstance(x, bytes) else _dump(x) for x in groups.samples_at(lo, hi)]
    columns = [numbers(groups.task_index[lo:hi]), *map(numbers, stats), joined(samples)]
    columns += [numbers(num), numbers(expected), numbers(expected - num), numbers(pct)]
    columns += [numbers(col) for col in custom[1]]
    return pieces, columns


def _custom_columns(entries: list[dict[str, Any] | None], taken: set[str]) -> tuple[list[str], list[np.ndarray]] | None:
    """compute_metrics' per-task entries (pass@k and the like, one dict a task) as columns:
    when every task has the same keys in the same order, none of them an entry's own, and each
    key's values are all ints (int64) or all finite floats. None otherwise: the entries are
    then rendered one by one, as dicts."""
    first = entries[0]
    if not first:
        return None
    keys = tuple(first)
    if taken.intersection(keys) or any(e is None or tuple(e) != keys for e in entries):
        return None
    columns: list[np.ndarray] = []
    for key in keys:
        values = [e[key] for e in entries]  # type: ignore[index]
        kinds = set(map(type, values))
        try:
            if kinds == {int}:
                columns.append(np.array(values, dtype=np.int64))
            elif kinds == {float} and np.isfinite(column := np.array(values, dtype=np.float64)).all():
                columns.append(column)
            else:
                return None
        except OverflowError:  # an int past 64 bits
            return None
    return list(keys), columns


def _heads(groups: GroupTable, lo: int, hi: int, head: Parts | None) -> list[bytes]:
    """Each entry of tasks lo..hi without rollout_infos and its closing brace."""
    if head is None:
        return [_dump(e)[:-1] for e in _entries(groups, lo, hi, parse_samples=False)]
    blob = fill(*head, hi - lo)
    at = offsets(*head, hi - lo).tolist()
    return [blob[a:b] for a, b in zip(at[:-1], at[1:])]


def _filled(groups: GroupTable, lo: int, hi: int, head: Parts) -> bytes | None:
    """The entries of tasks lo..hi in one fill: each rollout's text carries its task's head
    before it (the first) or the entry's close after it (the last). None where rollout_infos
    are not plain (see _info_parts) or a task has none."""
    pieces, columns = head
    n = hi - lo
    last = np.zeros(n, dtype=np.intp)
    last[-1] = 1
    if groups.rollout_infos is None:
        return fill([*pieces[:-1], b"}", b""], [*columns, choice((GROUP_SEP, b""), last)], n)
    info = _info_parts(groups, lo, hi)
    if info is None:
        return None
    info_pieces, info_columns, starts = info
    if not np.all(starts[1:] > starts[:-1]):
        return None
    pieces = [*pieces[:-1], b',"rollout_infos":[']
    at = offsets(pieces, columns, n)
    heads = Texts(fill(pieces, columns, n), at, np.append(at[1:], at[-1]))  # n heads, then an empty text
    rows = int(starts[-1])
    head_of = np.full(rows, n, dtype=np.int64)  # each task's first rollout carries its head
    head_of[starts[:-1]] = np.arange(n)
    close = np.zeros(rows, dtype=np.intp)  # 0: more rollouts follow; 1: the entry ends; 2: the chunk ends
    close[starts[1:] - 1] = 1
    close[-1] = 2
    suffix = choice((b"},", b"}]}" + GROUP_SEP, b"}]}"), close)
    return fill([b"", *info_pieces, b"", b""], [heads.take(head_of), *info_columns, suffix], rows)


def iter_group_dicts(groups: GroupTable) -> Iterator[dict[str, Any]]:
    """group_level_metrics entries (docs/metrics.md#groups) as plain dicts, rollout_infos last."""
    for lo in range(0, len(groups), CHUNK):
        hi = min(lo + CHUNK, len(groups))
        infos = _rollout_info_dicts(groups, lo, hi)
        for j, entry in enumerate(_entries(groups, lo, hi)):
            if infos is not None:
                entry["rollout_infos"] = infos[j]
            yield entry


def _entries(groups: GroupTable, lo: int, hi: int, parse_samples: bool = True) -> Iterator[dict[str, Any]]:
    """Entries of tasks lo..hi without rollout_infos; samples as dicts, or as pre-rendered
    JSON (orjson.Fragment) when only going to be written."""
    stat_keys = list(groups.stats)
    tasks = groups.task_index[lo:hi].tolist()
    stats = np.column_stack([groups.stats[k][lo:hi] for k in stat_keys]) if stat_keys else np.zeros((hi - lo, 0))
    complete = cast(list[bool], (~np.isnan(stats)).all(axis=1).tolist())
    stats_py = stats.tolist()
    num = groups.num_rollouts[lo:hi].tolist()
    expected = groups.expected_num_rollouts[lo:hi].tolist()
    samples = groups.samples_at(lo, hi)
    for j, task in enumerate(tasks):
        entry: dict[str, Any] = {TASK_KEY: task}
        if complete[j]:
            entry.update(zip(stat_keys, stats_py[j]))
        else:
            entry.update((k, v) for k, v in zip(stat_keys, stats_py[j]) if not math.isnan(v))
        sample: Any = samples[j]
        if isinstance(sample, bytes):
            sample = loads(sample) if parse_samples else orjson.Fragment(sample)
        entry["sample"] = sample
        entry["num_rollouts"] = num[j]
        entry["expected_num_rollouts"] = expected[j]
        entry["missing_num_rollouts"] = expected[j] - num[j]
        entry["reward_profile_completion_pct"] = 100.0 if expected[j] == 0 else 100.0 * num[j] / expected[j]
        if groups.custom is not None and groups.custom[lo + j]:
            entry.update(groups.custom[lo + j])  # type: ignore[arg-type]
        yield entry


def _rollout_info_dicts(
    groups: GroupTable, lo: int, hi: int, fragments: bool = False
) -> list[list[dict[str, Any]]] | None:
    """rollout_infos of tasks lo..hi: rollout_id, both indices, then each field the rollout
    shows (see _shown): finite values, ints and bools as integers; shown columns as they say."""
    table, bounds = groups.rollout_infos, groups.info_starts
    if table is None or bounds is None:
        return None
    a, b = int(bounds[lo]), int(bounds[hi])
    t = table.task_index[a:b].tolist()
    r = table.rollout_index[a:b].tolist()
    names = sorted(set(table.fields) | set(table.shown))
    columns = []
    for name in names:
        shown = table.shown.get(name)
        if shown is not None:
            columns.append(_shown_values(shown, a, b, fragments))
            continue
        col = table.fields[name]
        values = col.values[a:b]
        keep = (col.present[a:b] & np.isfinite(values)).tolist()
        py = values.tolist() if col.kind is ValueKind.FLOAT else [int(v) if k else v for v, k in zip(values.tolist(), keep)]
        columns.append([v if k else _ABSENT for v, k in zip(py, keep)])
    keys = ["rollout_id", TASK_KEY, ROLLOUT_KEY, *names]
    ids = [f"{x}:{y}" for x, y in zip(t, r)]
    infos = [{k: v for k, v in zip(keys, vals) if v is not _ABSENT} for vals in zip(ids, t, r, *columns)]
    return [infos[int(bounds[g]) - a : int(bounds[g + 1]) - a] for g in range(lo, hi)]


def _shown_values(shown: ShownField, a: int, b: int, fragments: bool) -> list[Any]:
    """Rows a..b of a shown column as Python values: JSON text parsed (or as orjson fragments,
    to be written), numbers as ints or floats, _ABSENT where the key is not shown."""
    present = shown.present[a:b].tolist()
    ints = shown.ints[a:b].tolist()
    text = shown.text[a:b].tolist() if shown.text is not None else [None] * (b - a)
    out: list[Any] = []
    for v, p, i, x in zip(shown.values[a:b].tolist(), present, ints, text):
        if not p:
            out.append(_ABSENT)
        elif x is not None:
            out.append(orjson.Fragment(x) if fragments else loads(x))
        else:
            out.append(int(v) if i else v)
    return out


def _info_parts(groups: GroupTable, lo: int, hi: int) -> tuple[list[bytes], list[Texts], np.ndarray] | None:
    """One rollout's text up to its closing brace as pieces and columns for the rollouts of
    tasks lo..hi, and where each task's rollouts start among them (hi - lo + 1 positions).
    None where a value is absent or not finite, or a field is shown (see _shown)."""
    table, bounds = groups.rollout_infos, groups.info_starts
    if table is None or bounds is None or table.shown:
        return None
    a, b = int(bounds[lo]), int(bounds[hi])
    t, r = numbers(table.task_index[a:b]), numbers(table.rollout_index[a:b])
    pieces = [b'{"rollout_id":"', b":", b'","' + TASK_KEY.encode() + b'":', b',"' + ROLLOUT_KEY.encode() + b'":']
    columns = [t, r, t, r]
    for name, col in table.fields.items():
        values = col.values[a:b]
        if not (col.present[a:b].all() and np.isfinite(values).all()):
            return None
        columns.append(numbers(values if col.kind is ValueKind.FLOAT else values.astype(np.int64)))
        pieces.append(b"," + orjson.dumps(name) + b":")
    return pieces, columns, bounds[lo : hi + 1] - a


GROUP_SEP = b",\n      "
"""Between two entries of group_level_metrics."""
_ABSENT = object()
