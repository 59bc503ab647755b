"""Read a rollouts JSONL file into one columnar batch per agent.

Fast path (`_arrow`): pyarrow reads the whole file column-wise (1M rows in well under a
second). Anything the fast path cannot prove it read exactly (a bad line, bytes that are not
UTF-8, mixed types in a column, an int written beside floats, a reward that is not a number,
bad indices) sends the chunk down the per-line path, which is slower but names every bad line.
"""

from __future__ import annotations

import os
import stat
from collections import defaultdict, deque
from concurrent.futures import Future, ThreadPoolExecutor
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from gym_metrics.rollouts._arrow import _nonblank, columns_from_table, parse_lines
from gym_metrics.rollouts._columns import (
    ROLLOUT_KEY_ALIASES,
    TASK_KEY_ALIASES,
    BufferRows,
    RolloutColumns,
    RowSource,
    bad_json_reason,
    concat,
    parse_row,
    row_index_value,
)
from gym_metrics.rollouts._values import PERF_KEY
from gym_metrics._util.memory import trim_heap
from gym_metrics._util.unique import unique
from gym_metrics.errors import FieldViolation, InvalidInputError

OnBadLine = Literal["fail", "skip"]


@dataclass(frozen=True)
class BadLine:
    """A line that could not be used: which field was wrong, and why."""

    line: int
    field: str
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.field}: {self.reason}"


@dataclass
class RolloutFile:
    """A rollouts file read into columns, one batch per agent."""

    agents: dict[str, RolloutColumns]
    bad_lines: list[BadLine] = field(default_factory=list)
    rows_read: int = 0
    perf: dict[str, list[dict[str, Any]]] | None = None
    """Per agent, the `ng_perf` blocks of its rows once read (`perf_blocks`: the columns do not
    hold them); None: not read yet."""
    sources: list[ReadFrom] = field(default_factory=list)
    """Where the rows were read, for what is read again when asked (`perf_blocks`)."""


@dataclass(frozen=True)
class ReadFrom:
    """A file (or a byte range of it) rows were read from, as `read_rollouts` read it."""

    path: str
    span: tuple[int, int] | None
    first_line: int
    """The number of its first line."""
    default_agent: str | None
    bad_lines: frozenset[int]
    """The numbers of its lines left out as bad."""
    perf_rows: PerfRows | None = None
    """Its rows holding an `ng_perf` object, by line; None: not known (every line is checked)."""


@dataclass(frozen=True)
class PerfRows:
    """Rows holding an `ng_perf` object: their line numbers, ascending, and each one's agent
    (an index into `names`)."""

    lines: np.ndarray
    agent: np.ndarray
    names: list[str]

    @classmethod
    def of(cls, agents: Mapping[str, RolloutColumns]) -> PerfRows | None:
        """Those of `agents` (as the reader flags them); None when a row has no line number."""
        lines, codes, names = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], list[str]()
        for name, cols in agents.items():
            held = (cols.non_numeric or {}).get(PERF_KEY)
            if held is None or not held.any():
                continue
            if cols.row_labels is None:
                return None
            lines.append(cols.row_labels[held].astype(np.int64))
            codes.append(np.full(int(held.sum()), len(names), np.int64))
            names.append(name)
        joined = np.concatenate(lines)
        order = np.argsort(joined, kind="stable")
        return cls(joined[order], np.concatenate(codes)[order], names)


CHUNK_BYTES = 16 << 20
"""The file is read and parsed this many bytes (of whole lines) at a time: the parser's
scratch memory stays bounded, the raw text is dropped as each chunk is read (unless rows are
kept), and a bad line sends only its own chunk down the per-line path."""


def read_rollouts(
    path: str | Path, on_bad_line: OnBadLine = "fail", default_agent: str | None = None, keep_rows: bool = True,
    span: tuple[int, int] | None = None, first_line: int = 1,
) -> RolloutFile:  # fmt: skip
    """Read `path`; with on_bad_line="fail" any bad line raises InvalidInputError naming it.
    `default_agent` names the rows without an agent_ref (by default such a row is a bad line).
    `keep_rows=False` keeps of the raw text only what samples need (each task's first
    rollouts): memory then holds the columns, not the file. `span`: only the whole lines in
    that byte range (`byte_ranges`), the first of them numbered `first_line`."""
    parts: dict[str, list[RolloutColumns]] = defaultdict(list)
    result = RolloutFile({}, [], 0)
    line_offset = first_line - 1
    for chunk, lines, fast in _fast_chunks(Path(path), default_agent, span=span):
        part = fast or _read_slow(chunk, lines, 0, len(lines), default_agent)
        for name, cols in part.agents.items():
            if cols.row_labels is not None:
                cols.row_labels += line_offset
            if not keep_rows and cols.rows is not None:
                cols.rows = cols.rows.keep_only(sample_candidates(cols))
            parts[name].append(cols)
        result.bad_lines += [BadLine(b.line + line_offset, b.field, b.reason) for b in part.bad_lines]
        result.rows_read += part.rows_read
        line_offset += len(lines)
    result.agents = {name: concat(parts[name]) for name in sorted(parts)}
    result.sources = [ReadFrom(str(path), span, first_line, default_agent, frozenset(b.line for b in result.bad_lines), PerfRows.of(result.agents))]
    del parts
    trim_heap()  # the chunks' scratch space, back to the OS
    if result.bad_lines and on_bad_line == "fail":
        raise InvalidInputError(
            f"{path}: {len(result.bad_lines)} bad line(s)",
            [FieldViolation(b.field, b.reason, b.line, row_name="line") for b in result.bad_lines],
        )
    return result


_Chunk = tuple[bytes, BufferRows, "RolloutFile | None"]


def _fast_chunks(path: Path, default_agent: str | None, ahead: int = 2, span: tuple[int, int] | None = None) -> Iterator[_Chunk]:
    """(chunk, its lines, its columns or None when they cannot be read column-wise) in file
    order. The next chunks are read, parsed and turned into columns in threads (a read,
    pyarrow and numpy release the GIL for most of it; two threads keep both cores busy while
    one of them is in Python) while the caller files this one. At most `ahead` + 1 chunks are
    in memory."""

    def columns(chunk: bytes) -> _Chunk:
        lines = BufferRows(chunk, *line_bounds(chunk))
        return chunk, lines, _read_fast(chunk, lines, 0, len(lines), default_agent)

    def read(fd: int, pos: int, end: int) -> _Chunk:
        return columns(os.pread(fd, end - pos, pos))

    with path.open("rb", buffering=0) as f, ThreadPoolExecutor(ahead, thread_name_prefix="gym-metrics-read") as pool:
        if stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            jobs = (pool.submit(read, f.fileno(), pos, end) for pos, end in _spans(f.fileno(), CHUNK_BYTES, span))
        else:
            jobs = (pool.submit(columns, chunk) for chunk in _stream_chunks(f, CHUNK_BYTES))
        pending: deque[Future[_Chunk]] = deque()
        for job in jobs:
            pending.append(job)
            if len(pending) > ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def read_chunks(path: Path, size: int, limit: int | None = None) -> Iterator[bytes]:
    """The file's whole lines, about `size` bytes at a time (a longer line comes whole). A
    regular file is read chunk by chunk at line boundaries found first (one copy of each
    byte); a pipe is read as a stream. `limit`: its first `limit` lines only (blank ones count)."""
    if limit is not None:
        yield from _first_lines(read_chunks(path, size), limit)
        return
    with path.open("rb", buffering=0) as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            yield from _stream_chunks(f, size)
            return
        for pos, end in _spans(f.fileno(), size):
            yield os.pread(f.fileno(), end - pos, pos)


def _first_lines(chunks: Iterator[bytes], limit: int) -> Iterator[bytes]:
    left = limit
    for chunk in chunks:
        if left <= 0:
            return
        newlines = _newlines(np.frombuffer(chunk, dtype=np.uint8))
        if len(newlines) >= left:
            yield chunk[: int(newlines[left - 1]) + 1]
            return
        left -= len(newlines)
        yield chunk


def byte_ranges(path: str | Path, n: int) -> list[tuple[int, int]]:
    """The file cut into about `n` [start, end) byte ranges of whole lines (fewer for a small
    file), for readers in other processes or on other machines (`read_rollouts(span=...)`)."""
    with Path(path).open("rb", buffering=0) as f:
        total = os.fstat(f.fileno()).st_size
        return list(_spans(f.fileno(), max(1, -(-total // max(1, n)))))


def count_lines(path: str | Path, span: tuple[int, int]) -> int:
    """Lines in a whole-line byte range (a last line without a newline counts)."""
    start, end = span
    count, last = 0, b"\n"
    with Path(path).open("rb", buffering=0) as f:
        for pos in range(start, end, CHUNK_BYTES):
            block = os.pread(f.fileno(), min(CHUNK_BYTES, end - pos), pos)
            count += block.count(b"\n")
            last = block[-1:] or last
    return count + (last != b"\n")


def _spans(fd: int, size: int, span: tuple[int, int] | None = None) -> Iterator[tuple[int, int]]:
    """[pos, end) byte spans of whole lines, about `size` bytes each, of a regular file (of
    the whole-line range `span` of it)."""
    pos, total = span if span is not None else (0, os.fstat(fd).st_size)
    while pos < total:
        end = _line_end(fd, pos, min(pos + size, total), total)
        yield pos, end
        pos = end


def _line_end(fd: int, pos: int, end: int, total: int, window: int = 1 << 16) -> int:
    """Just past the last newline in [pos, end), or past the first one after it (a line longer
    than a chunk), or `total`."""
    if end >= total:
        return total
    back = end
    while back > pos:  # look back, a window at a time
        lo = max(pos, back - window)
        cut = os.pread(fd, back - lo, lo).rfind(b"\n")
        if cut >= 0:
            return lo + cut + 1
        back = lo
    ahead = end
    while ahead < total:  # a line longer than the chunk: take all of it
        found = os.pread(fd, window, ahead).find(b"\n")
        if found >= 0:
            return ahead + found + 1
        ahead += window
    return total


def _stream_chunks(f: Any, size: int) -> Iterator[bytes]:
    rest = b""
    while block := f.read(size):
        cut = block.rfind(b"\n") + 1
        if cut == 0:  # no line ends in this block: it all belongs to the next chunk
            rest += block
            continue
        yield b"".join((rest, memoryview(block)[:cut]))
        rest = block[cut:]
    if rest:
        yield rest


def sample_candidates(cols: RolloutColumns) -> np.ndarray:
    """Positions of the rows that can become a task's sample (its first measured rollout):
    per task, the lowest rollout among unmasked rows, and, whether failed rows are measured
    being the aggregation's option, among unmasked rows that did not fail (left out) and among
    unmasked or failed ones (counted as zero, which counts a masked failure too)."""
    picks = [_first_per_task(cols, ~cols.masked)]
    if cols.errors is not None and cols.errors.any():
        failed = cols.errors != 0
        picks += [_first_per_task(cols, ~cols.masked & ~failed), _first_per_task(cols, ~cols.masked | failed)]
    return unique(np.concatenate(picks))


def _first_per_task(cols: RolloutColumns, mask: np.ndarray) -> np.ndarray:
    pos = np.flatnonzero(mask)
    t, r = cols.task_index[pos], cols.rollout_index[pos]
    if not np.all((t[1:] > t[:-1]) | ((t[1:] == t[:-1]) & (r[1:] > r[:-1]))):
        order = np.lexsort((r, t))
        pos, t = pos[order], t[order]
    return pos[np.concatenate(([True], t[1:] != t[:-1]))] if len(pos) else pos


BOM = b"\xef\xbb\xbf"


def line_bounds(buf: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of every line, blank lines included (line number = position + 1). A UTF-8
    byte-order mark opening a line (a file saved by Windows tools, or such files concatenated)
    is left out of the line, so every reader sees the same row."""
    data = np.frombuffer(buf, dtype=np.uint8)
    newlines = _newlines(data)
    starts = np.concatenate(([0], newlines + 1)).astype(np.int64)
    ends = np.concatenate((newlines, [len(buf)])).astype(np.int64)
    if len(buf) and buf.endswith(b"\n"):  # no phantom empty line after the final newline
        starts, ends = starts[:-1], ends[:-1]
    idx = np.flatnonzero(ends - starts >= 3)
    s = starts[idx]
    bom = idx[data[s] == 0xEF]  # a BOM's first byte opens few lines (none, usually): check those
    if len(bom):
        s = starts[bom]
        starts[bom[(data[s + 1] == 0xBB) & (data[s + 2] == 0xBF)]] += 3
    return starts, ends


def _newlines(data: np.ndarray, step: int = 1 << 22) -> np.ndarray:
    """Positions of the newline bytes, a few MB at a time: one scratch array that stays in
    cache, instead of a mask as large as the file (twice as fast on a 200 MB file)."""
    if len(data) <= step:
        return np.flatnonzero(data == 10)
    scratch = np.empty(step, dtype=bool)
    parts = []
    for lo in range(0, len(data), step):
        chunk = data[lo : lo + step]
        mask = scratch[: len(chunk)]
        np.equal(chunk, 10, out=mask)
        parts.append(np.flatnonzero(mask) + lo)
    return np.concatenate(parts)


def _read_fast(buf: bytes, all_lines: BufferRows, lo: int, hi: int, default_agent: str | None = None) -> RolloutFile | None:
    """Lines lo..hi column-wise; None when that cannot be exact (then they go line by line)."""
    parsed = parse_lines(buf, all_lines, lo, hi)
    if parsed is None:
        return None
    table, lines = parsed
    if not len(lines):
        return RolloutFile({}, [], 0)
    agents = columns_from_table(table, all_lines, lines, default_agent)
    return RolloutFile(agents, [], table.num_rows) if agents is not None else None


def _read_slow(buf: bytes, all_lines: BufferRows, lo: int, hi: int, default_agent: str | None = None) -> RolloutFile:
    """Lines lo..hi one by one: every bad line is named, good lines are kept."""
    starts, ends = all_lines.starts, all_lines.ends
    by_agent: dict[str, list[tuple[int, dict[str, Any], int]]] = defaultdict(list)
    bad: list[BadLine] = []
    rows_read = 0
    for pos in (lo + _nonblank(buf, starts[lo:hi], ends[lo:hi])).tolist():
        line_no = pos + 1
        raw = buf[starts[pos] : ends[pos]]
        try:
            row = parse_row(raw)
        except ValueError as exc:
            bad.append(BadLine(line_no, "json", bad_json_reason(exc)))
            continue
        problem = _row_problem(row, default_agent)
        if problem:
            bad.append(BadLine(line_no, *problem))
            continue
        rows_read += 1
        name = agent_name(row)
        by_agent[name if name is not None else str(default_agent)].append((line_no, row, pos))
    agents = {}
    for name in sorted(by_agent):
        entries = by_agent[name]
        cols = RolloutColumns.from_rows([e[1] for e in entries], labels=[e[0] for e in entries], keep_rows=False)
        positions = np.array([e[2] for e in entries], dtype=np.int64)
        cols.rows = RowSource(all_lines, positions)  # re-parse on access, keep no dicts
        cols.label_name = "line"
        agents[name] = cols
    return RolloutFile(agents, bad, rows_read)


NO_AGENT = "missing: every rollout must name its agent (`aggregate` and `collect` take `--agent NAME` for rows that have none)"


def agent_name(row: Mapping[str, Any]) -> str | None:
    """The row's agent_ref.name; None when the row names no agent (no agent_ref, or no name)."""
    ref = row.get("agent_ref")
    name = ref.get("name") if isinstance(ref, Mapping) else None
    return name if isinstance(name, str) else None


def agent_problem(row: Mapping[str, Any], default_agent: str | None) -> str | None:
    """Why the row's agent is unusable: an agent_ref that is not an object or a name that is
    not a string, or no agent at all when there is no `default_agent`."""
    ref = row.get("agent_ref")
    if ref is not None and not isinstance(ref, Mapping):
        return f"agent_ref must be an object with a name, got {ref!r}"[:200]
    name = ref.get("name") if isinstance(ref, Mapping) else None
    if name is not None and not isinstance(name, str):
        return f"must be a string, got {name!r}"[:200]
    if name is None and default_agent is None:
        source = row.get("task_source")
        if isinstance(source, str):  # NeMo Gym's collated rows: the agent comes from its config
            return f"missing: the row routes by task_source {source!r} (NeMo Gym's collated data): give --agent NAME, the agent its config runs it with"[:300]
        return NO_AGENT
    return None


def _row_problem(row: Any, default_agent: str | None = None) -> tuple[str, str] | None:
    """(field, reason) when the row cannot be aggregated."""
    if not isinstance(row, Mapping):
        return "row", f"expected a JSON object, got {type(row).__name__}"
    problem = agent_problem(row, default_agent)
    if problem:
        return "agent_ref.name", problem
    for aliases in (TASK_KEY_ALIASES, ROLLOUT_KEY_ALIASES):
        try:
            row_index_value(row, aliases)
        except InvalidInputError as exc:
            return exc.violations[0].field, exc.violations[0].description
    return None
