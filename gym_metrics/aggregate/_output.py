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
from typing import IO, Any, cast

import numpy as np
import orjson

from gym_metrics._json import loads
from gym_metrics.aggregate._columns import ROLLOUT_KEY, TASK_KEY, ShownField, ValueKind
from gym_metrics.aggregate._writer import BackgroundWriter
from gym_metrics.aggregate._forked import discard, finish, render_workers, start
from gym_metrics.aggregate._tables import AgentAggregate, GroupTable

_CHUNK = 4096
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
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb", buffering=0) as raw, BackgroundWriter(raw) as f:
        write_json(cast(IO[bytes], f), aggregates, extra)
    tmp.replace(path)
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
    render = agg.prerender if isinstance(agg.prerender, GroupsRender) else GroupsRender(agg.groups, _tmp_dir(f))
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


class GroupsRender:
    """An agent's group_level_metrics: the first chunk and range rendered by the writer, the
    later ranges by forked workers (see _forked) started when this is made, possibly long
    before the file is written."""

    def __init__(self, groups: GroupTable, tmp_dir: Path) -> None:
        self.groups = groups
        self._ranges = _ranges(groups, min(_CHUNK, len(groups)))
        self._workers = start(tmp_dir, self._ranges[1:], self._render, _GROUP_SEP)
        weakref.finalize(self, discard, self._workers)  # never written: no stray processes or files

    def _render(self, lo: int, hi: int) -> Iterator[bytes]:
        return iter_group_json(self.groups, lo, hi)

    def write(self, f: IO[bytes]) -> None:
        if not len(self.groups):
            return
        blobs = self._render(0, min(_CHUNK, len(self.groups)))
        f.write(b"\n      " + next(blobs))  # the first entry: no separator before it
        for blob in blobs:
            f.write(_GROUP_SEP + blob)
        try:
            for k, (lo, hi) in enumerate(self._ranges):
                worker = self._workers[k - 1] if k else None
                if worker is None:
                    for blob in self._render(lo, hi):
                        f.write(_GROUP_SEP + blob)
                else:
                    self._workers[k - 1] = None
                    finish(f, worker, self._render, _GROUP_SEP)
        finally:
            discard(self._workers)


_WRITER_SHARE = 0.6
"""The writing process's range, against a worker's: it also has the agent level to finish, the
file's head to write and the workers' bytes to append (measured: the 2-process split that
ends both together at 1M rollouts)."""


def _ranges(groups: GroupTable, start: int) -> list[tuple[int, int]]:
    """Groups start.. cut on chunk boundaries into one range per render process (see _forked),
    by rollouts: the writer's range _WRITER_SHARE of a worker's."""
    n = len(groups)
    weight = groups.info_starts if groups.info_starts is not None else np.arange(n + 1)
    workers = render_workers(int(weight[n] - weight[start])) if start < n else 1
    if workers == 1:
        return [(start, n)] if start < n else []
    shares = np.cumsum([_WRITER_SHARE] + [1.0] * (workers - 1))
    targets = weight[start] + (weight[n] - weight[start]) * shares[:-1] / shares[-1]
    cuts = np.searchsorted(weight, targets)
    bounds = [start, *(start + -(-(int(c) - start) // _CHUNK) * _CHUNK for c in cuts), n]
    bounds = sorted({min(b, n) for b in bounds})
    return list(zip(bounds[:-1], bounds[1:]))


def _tmp_dir(f: IO[bytes]) -> Path:
    name = getattr(f, "name", None)
    return Path(name).parent if isinstance(name, str) else Path(".")


def iter_group_json(groups: GroupTable, start: int = 0, stop: int | None = None) -> Iterator[bytes]:
    """Compact JSON of consecutive tasks start..stop: each yielded blob holds one or more whole
    entries separated by commas; rollout_infos go last in each entry. Plain chunks (every stat
    defined, finite rollout values) are rendered column-wise without a dict per task."""
    stop = len(groups) if stop is None else stop
    for lo in range(start, stop, _CHUNK):
        hi = min(lo + _CHUNK, stop)
        head = _head_parts(groups, lo, hi)
        info = _info_parts(groups, lo, hi) if head is not None else None
        if head is not None and info is not None and (blob := _uniform_text(head, info)) is not None:
            yield blob
            continue
        heads = list(map(head[0].__mod__, zip(*head[1]))) if head is not None else None
        if heads is None:
            heads = [_dump(e)[:-1] for e in _entries(groups, lo, hi, parse_samples=False)]
        if groups.rollout_infos is None:
            yield _GROUP_SEP.join(h + b"}" for h in heads)
            continue
        infos = _infos_text(groups, lo, hi)
        if infos is not None:
            yield _with_infos(heads, *infos)
            continue
        dicts = _rollout_info_dicts(groups, lo, hi, fragments=True) or []
        yield _GROUP_SEP.join(h + b',"rollout_infos":' + _dump(d) + b"}" for h, d in zip(heads, dicts))


def _heads_text(groups: GroupTable, lo: int, hi: int) -> list[bytes] | None:
    """Each entry of tasks lo..hi without rollout_infos and its closing brace, through one
    bytes template; None unless every stat is defined and no task has custom metrics."""
    head = _head_parts(groups, lo, hi)
    return list(map(head[0].__mod__, zip(*head[1]))) if head is not None else None


Parts = tuple[bytes, list[list[bytes]]]
"""A bytes template and its arguments, one list of tokens per slot."""


def _head_parts(groups: GroupTable, lo: int, hi: int) -> Parts | None:
    """_heads_text's template and token columns."""
    stat_keys = list(groups.stats)
    stats = [groups.stats[k][lo:hi] for k in stat_keys]
    if any(np.isnan(col).any() for col in stats):
        return None
    if groups.custom is not None and any(groups.custom[lo:hi]):
        return None
    num = groups.num_rollouts[lo:hi]
    expected = groups.expected_num_rollouts[lo:hi]
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(expected == 0, 100.0, 100.0 * num / np.where(expected == 0, 1, expected))

    def key(k: str) -> bytes:
        return orjson.dumps(k).replace(b"%", b"%%")

    template = b"{" + key(TASK_KEY) + b":%s"
    template += b"".join(b"," + key(k) + b":%s" for k in stat_keys)
    template += b',"sample":%s,"num_rollouts":%s,"expected_num_rollouts":%s'
    template += b',"missing_num_rollouts":%s,"reward_profile_completion_pct":%s'
    samples = [x if isinstance(x, bytes) else _dump(x) for x in groups.samples_at(lo, hi)]
    columns = [_tokens(groups.task_index[lo:hi]), *(_tokens(c) for c in stats), samples]
    columns += [_tokens(num), _tokens(expected), _tokens(expected - num), _tokens(pct)]
    return template, columns


def iter_group_dicts(groups: GroupTable) -> Iterator[dict[str, Any]]:
    """group_level_metrics entries (docs/metrics.md#groups) as plain dicts, rollout_infos last."""
    for lo in range(0, len(groups), _CHUNK):
        hi = min(lo + _CHUNK, len(groups))
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


def _tokens(values: np.ndarray) -> list[bytes]:
    """JSON text of each value, at C speed: orjson renders the array, we split on commas. Few
    distinct values (indices, counts, 0/1 rewards and their stats) are rendered once each and
    looked up: one object per value instead of a new bytes each."""
    n = len(values)
    if n >= 512 and values.dtype.kind in "iu":
        low, span = int(values.min()), int(values.max()) - int(values.min())
        if span < n:
            table = np.array(_rendered(np.arange(low, low + span + 1, dtype=np.int64)) + [b""], dtype=object)
            return cast(list[bytes], table[values - low].tolist())  # (b"": numpy makes no 2-d array)
    elif n >= 512 and values.dtype == np.float64:
        bits = values.view(np.int64)  # compared as bits: -0.0 is not 0.0
        seen = np.unique(bits[:256])
        if len(seen) <= 16:
            at = np.searchsorted(seen, bits).clip(max=len(seen) - 1)
            if (seen[at] == bits).all():
                return cast(list[bytes], np.array(_rendered(seen.view(np.float64)) + [b""], dtype=object)[at].tolist())
    return _rendered(values)


def _rendered(values: np.ndarray) -> list[bytes]:
    if len(values) == 0:
        return []
    return orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1].split(b",")


def _infos_text(groups: GroupTable, lo: int, hi: int) -> tuple[list[bytes], list[int]] | None:
    """The rollout_infos of tasks lo..hi, built without a dict per rollout: every value is
    rendered column-wise by orjson and slotted into one bytes template per rollout. Returns
    the rollouts' texts (each followed by "," or, the last of its task, by the entry's close
    and the group separator) and where each task's rollouts start (hi - lo + 1 positions).
    None when this fast path does not apply (absent or non-finite values)."""
    info = _info_parts(groups, lo, hi)
    if info is None:
        return None
    template, columns, starts = info
    texts = list(map((template + b"},").__mod__, zip(*columns)))
    for end in set(starts[1:]) - set(starts[:1]):  # each group's last rollout closes the entry
        texts[end - 1] = texts[end - 1][:-1] + _CLOSE
    return texts, starts


def _info_parts(groups: GroupTable, lo: int, hi: int) -> tuple[bytes, list[list[bytes]], list[int]] | None:
    """_infos_text's template (one rollout, without its closing brace), token columns and
    task starts."""
    table, bounds = groups.rollout_infos, groups.info_starts
    if table is None or bounds is None or table.shown:
        return None
    a, b = int(bounds[lo]), int(bounds[hi])
    columns = [_tokens(table.task_index[a:b]), _tokens(table.rollout_index[a:b])]
    template = b'{"rollout_id":"%s:%s","' + TASK_KEY.encode() + b'":%s,"' + ROLLOUT_KEY.encode() + b'":%s'
    for name, col in table.fields.items():
        values = col.values[a:b]
        if not (col.present[a:b].all() and np.isfinite(values).all()):
            return None
        columns.append(_tokens(values if col.kind is ValueKind.FLOAT else values.astype(np.int64)))
        template += b"," + orjson.dumps(name).replace(b"%", b"%%") + b":%s"
    t, r = columns[0], columns[1]
    return template, [t, r, t, r, *columns[2:]], (bounds[lo : hi + 1] - a).tolist()


def _uniform_text(head: Parts, info: tuple[bytes, list[list[bytes]], list[int]]) -> bytes | None:
    """A chunk whose tasks all have K rollouts (tasks x repeats, the usual shape) in one join:
    the i-th rollouts of every task are rendered by one template, the first's carrying its
    task's head and the last's closing the entry, so no text is made per task. None for
    uneven tasks."""
    (head_template, head_columns), (template, columns, starts) = head, info
    k = starts[1] - starts[0] if len(starts) > 1 else 0
    if k < 1 or starts != list(range(0, starts[-1] + 1, k)):
        return None
    texts: list[bytes] = [b""] * starts[-1]
    for i in range(k):
        slot = (head_template + b',"rollout_infos":[' if i == 0 else b"") + template + (b"}" + _CLOSE if i == k - 1 else b"},")
        args = [c[i::k] for c in columns]
        texts[i::k] = list(map(slot.__mod__, zip(*(head_columns + args if i == 0 else args))))
    texts[-1] = texts[-1][: -len(_GROUP_SEP)]  # blobs are joined by the separator
    return b"".join(texts)


def _with_infos(heads: list[bytes], texts: list[bytes], starts: list[int]) -> bytes:
    """The entries of a chunk: each head, then its rollouts' texts (the last closing the entry),
    joined once (no copy per entry)."""
    pieces: list[bytes] = []
    for j, head in enumerate(heads):
        a, b = starts[j], starts[j + 1]
        if a == b:
            pieces += (head, b',"rollout_infos":[' + _CLOSE)
        else:
            pieces.append(head + b',"rollout_infos":[')
            pieces += texts[a:b]
    pieces[-1] = pieces[-1][: -len(_GROUP_SEP)]  # blobs are joined by the separator
    return b"".join(pieces)


_GROUP_SEP = b",\n      "
_CLOSE = b"]}" + _GROUP_SEP
_ABSENT = object()
