"""Task and rollout indices of the collector's input lines, as NeMo Gym 0.7.0 assigns them
(`nemo_gym/rollout_collection.py`, the loop that resolves task indices), and the check that
makes every key unambiguous before anything is written or skipped.

- A line to verify keeps its `_ng_task_index` when it has one (upstream slicers stamp globally
  stable indices); a line without one gets the index of the first identical line (the same
  text, as NeMo Gym compares lines), or the next new index: the number of distinct such lines
  before it. Its rollout indices (one, or `--num-repeats K`) count per task index, over every
  agent, in file order; a given `_ng_rollout_index` is replaced.
- A line that already has a reward and both indices is a finished rollout: its key stays as
  given (a "fixed" key). Those are the only keys that can clash, so they are found first, in a
  pass over the input (only when the input can hold such lines): a clash is an error before
  anything runs, and counted indices pass over the fixed ones of their task.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gym_metrics.rollouts import ROLLOUT_KEY, ROLLOUT_KEY_ALIASES, TASK_KEY, TASK_KEY_ALIASES, agent_name, agent_problem, line_bounds, parse_row, read_chunks, row_index_value
from gym_metrics.errors import FieldViolation, InvalidInputError

CHUNK_BYTES = 16 << 20


class FixedKeys:
    """(task, rollout) of every already-scored input line that carries both indices."""

    def __init__(self, task: np.ndarray | None = None, rollout: np.ndarray | None = None) -> None:
        self._task = np.zeros(0, np.int64) if task is None else task
        self._rollout = np.zeros(0, np.int64) if rollout is None else rollout
        self._sorted = False

    def __len__(self) -> int:
        return len(self._task)

    def taken(self, task: int) -> set[int]:
        """The rollout indices of `task` that fixed keys hold."""
        if not self._sorted:  # sorted once, when a line to verify first asks
            order = np.lexsort((self._rollout, self._task))
            self._task, self._rollout, self._sorted = self._task[order], self._rollout[order], True
        lo, hi = np.searchsorted(self._task, [task, task + 1])
        return set(self._rollout[lo:hi].tolist()) if hi > lo else set()


class InputChanged(Exception):
    """A line got a task index an earlier run gave another line (TaskLines.check)."""

    def __init__(self, task: int) -> None:
        super().__init__(task)
        self.task = task


ANY_LINE = bytes(16)
"""The recorded line of a task index a skipped bad line holds: the line fixed takes it."""


def task_lines_path(output: Path) -> Path:
    """Where the task lines of output `output` are kept (TaskLines): `.<name>.tasks` beside the
    file it names, through whatever path names it."""
    real = output.resolve()
    return real.with_name(f".{real.name}.tasks")


def carry_task_lines(sources: Sequence[Path], target: Path) -> None:
    """The task lines kept beside the outputs `sources` joined into those of output `target`
    (its own kept): what a resume checks survives `collect --processes`' shards and their
    merge. A task a skipped bad line holds (ANY_LINE) takes another's line; InputChanged when
    two record different lines for one task (they were collected from different inputs)."""
    path = task_lines_path(target)
    own = _records(path)
    joined = own
    for source in sources:
        joined = _joined(joined, _records(task_lines_path(source)))
    if len(joined) != len(own) or not np.array_equal(joined, own):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(joined.tobytes())
        os.replace(tmp, path)


def _records(path: Path) -> np.ndarray:
    data = path.read_bytes() if path.exists() else b""
    return np.frombuffer(data[: len(data) // 16 * 16], np.uint64).reshape(-1, 2)


def _joined(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if len(a) < len(b):
        a, b = b, a
    n = len(b)
    head_a, head_b = a[:n], b[:n]
    any_a, any_b = ~head_a.any(axis=1), ~head_b.any(axis=1)
    differ = (head_a != head_b).any(axis=1) & ~any_a & ~any_b
    if differ.any():
        raise InputChanged(int(np.flatnonzero(differ)[0]))
    out = a.copy()
    out[:n][any_a] = head_b[any_a]
    return out


class TaskLines:
    """The digest of the line each counted task index was made from, kept beside the output
    (`.<name>.tasks`, 16 bytes a task, written before the task's rows): `--resume` of an input
    whose lines moved (one added, removed or edited before others) would map the output's keys
    to other lines, running some twice and others never; it is refused instead. A run that
    does not resume starts the file again."""

    def __init__(self, output: Path, resume: bool) -> None:
        self.path = task_lines_path(output)  # (the file's, through whatever path names it, as its lock)
        known = self.path.read_bytes() if resume and self.path.exists() else b""
        self.known = bytearray(known[: len(known) // 16 * 16])
        self._file = self.path.open("ab" if resume else "wb")
        if resume and len(known) != len(self.known):
            self._file.truncate(len(self.known))

    def check(self, task: int, digest: bytes) -> None:
        """Task `task` is made from the line of `digest` (ANY_LINE: a bad line, which any line
        may replace): as the run being resumed made it, or recorded."""
        at = task * 16
        if at < len(self.known):
            if self.known[at : at + 16] not in (digest, ANY_LINE):
                raise InputChanged(task)
        elif at == len(self.known):
            self.known += digest
            self._file.write(digest)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class Indexer:
    """Assigns the indices of the lines that have no fixed key, one line at a time, in file order
    (`lines`: each new task's line checked against, or recorded for, a resumed output)."""

    def __init__(self, fixed: FixedKeys | None = None, lines: TaskLines | None = None) -> None:
        self._lines = lines
        self._fixed = fixed if fixed is not None and len(fixed) else None
        self._tasks: dict[bytes, int] = {}
        """Digest of a line without a task index -> its task index."""
        self._next: dict[int, int] = {}
        """Task index -> the next rollout index to try."""

    def task_of(self, line: bytes, bad: bool = False) -> int:
        """The task index of a line without one: `line` is its text as NeMo Gym compares it
        (see `line_identity`); `bad`: a line skipped, whose index is kept for it fixed."""
        digest = hashlib.blake2b(line, digest_size=16).digest()
        task = self._tasks.get(digest)
        if task is None:
            task = self._tasks[digest] = len(self._tasks)
            if self._lines is not None:
                self._lines.check(task, ANY_LINE if bad else digest)
        return task

    def rollouts(self, task: int, n: int) -> list[int]:
        """The next `n` rollout indices of `task` (those of fixed keys passed over)."""
        r = self._next.get(task, 0)
        taken = self._fixed.taken(task) if self._fixed is not None else set()
        out: list[int] = []
        while len(out) < n:
            if r not in taken:
                out.append(r)
            r += 1
        self._next[task] = r
        return out


def line_identity(chunk: bytes, start: int, end: int) -> bytes:
    """A line's text as NeMo Gym reads it in text mode (a CRLF ending is a newline), with the
    newline: so the last line of a file without a final newline differs from the same line
    earlier, as it does there."""
    line = chunk[start:end]
    if line.endswith(b"\r"):
        line = line[:-1]
    return line + b"\n" if end < len(chunk) else line


def is_scored(row: dict[str, Any]) -> bool:
    """A line that already has a reward (any JSON value but null) is a rollout, not a task."""
    return row.get("reward") is not None


def fixed_key(row: dict[str, Any], default_agent: str | None) -> tuple[str, int, int] | None:
    """(agent, task, rollout) of an already-scored row with both indices (aliases as `aggregate`
    reads them) and a usable agent; None for any other row (bad rows included)."""
    if not is_scored(row) or agent_problem(row, default_agent):
        return None
    name = agent_name(row)
    agent = default_agent if name is None else name
    if not agent:
        return None
    try:
        if not _has_any(row, TASK_KEY_ALIASES) or not _has_any(row, ROLLOUT_KEY_ALIASES):
            return None
        return agent, row_index_value(row, TASK_KEY_ALIASES), row_index_value(row, ROLLOUT_KEY_ALIASES)
    except InvalidInputError:
        return None


def _has_any(row: dict[str, Any], keys: tuple[str, ...]) -> bool:
    return any(row.get(k) is not None for k in keys)


def find_fixed_keys(path: Path, num_repeats: object, default_agent: str | None, limit: int | None = None) -> FixedKeys:
    """The pass before anything runs: the fixed keys of the input (its first `limit` lines).
    Raises InvalidInputError naming the lines when one (agent, task, rollout) is held by two
    lines. With `num_repeats` every line is verified again, so no key is fixed."""
    if num_repeats is not None:
        return FixedKeys()
    agents: dict[str, int] = {}
    parts: list[tuple[np.ndarray, ...]] = []
    line_no = 0
    for chunk in read_chunks(path, CHUNK_BYTES, limit):
        starts, ends = line_bounds(chunk)
        if _may_hold_reward(chunk):
            parts.append(_chunk_keys(chunk, starts, ends, line_no, default_agent, agents))
        line_no += len(starts)
    if not parts:
        return FixedKeys()
    code, task, rollout, line = (np.concatenate(p) for p in zip(*parts))
    _refuse_repeats(path, list(agents), code, task, rollout, line)
    return FixedKeys(task, rollout)


def _may_hold_reward(chunk: bytes) -> bool:
    return may_hold_key(chunk, b"reward")


_ASCII_ESCAPE = re.compile(rb"\\u00[2-7][0-9a-fA-F]")
"""A JSON escape of a printable ASCII character (how a key could spell `reward` unliterally)."""


def may_hold_key(chunk: bytes, key: bytes) -> bool:
    """False only when no JSON object in `chunk` can have the key `key` (printable ASCII):
    its text is absent and no printable ASCII character is written as a \\u escape."""
    return key + b'"' in chunk or _ASCII_ESCAPE.search(chunk) is not None


_SCHEMA: Any = None


def _chunk_keys(
    chunk: bytes, starts: np.ndarray, ends: np.ndarray, line_offset: int, default_agent: str | None, agents: dict[str, int]
) -> tuple[np.ndarray, ...]:
    """(agent code, task, rollout, 1-based line) of the chunk's fixed keys: column-wise where
    pyarrow reads the key columns, line by line for the other lines that can hold a reward."""
    parts: list[tuple[np.ndarray, ...]] = []
    rest: Iterable[int] = range(len(starts))
    cols = _key_columns(chunk, starts, ends)
    if cols is not None:
        lines, names, codes, task, rollout, ok = cols
        to_global = np.array([agents.setdefault(n, len(agents)) for n in names], dtype=np.int64)
        parts.append((to_global[codes[ok]], task[ok], rollout[ok], lines[ok]))
        done = np.zeros(len(starts), dtype=bool)
        done[lines[ok]] = True
        rest = np.flatnonzero(~done).tolist()
    found: list[tuple[int, int, int, int]] = []
    for i in rest:
        raw = chunk[starts[i] : ends[i]]
        if b"reward" not in raw and b"\\u" not in raw:
            continue
        try:
            row = parse_row(raw)
        except ValueError:
            continue  # a bad line: the reader reports it
        key = fixed_key(row, default_agent) if isinstance(row, dict) else None
        if key is not None:
            found.append((agents.setdefault(key[0], len(agents)), key[1], key[2], i))
    if found:
        parts.append(tuple(np.array(col, dtype=np.int64) for col in zip(*found)))
    code, task, rollout, line = (np.concatenate([p[k] for p in parts]) if parts else np.zeros(0, np.int64) for k in range(4))
    return code, task, rollout, line + line_offset + 1


def _key_columns(chunk: bytes, starts: np.ndarray, ends: np.ndarray) -> tuple[Any, ...] | None:
    """(chunk line of each row, agent names, tasks, rollouts, rows whose key is plainly fixed)
    when pyarrow reads just the key columns of the chunk; None otherwise. A row counts only
    when the line-by-line reading would give it the same fixed key (agent_ref.name a non-empty
    string, both `_ng_` indices non-negative integers, a numeric reward: another reward makes
    pyarrow refuse the chunk, which is then read line by line)."""
    import pyarrow as pa
    import pyarrow.json as pj

    from gym_metrics.rollouts import BufferRows, too_deep

    global _SCHEMA
    if _SCHEMA is None:
        _SCHEMA = pa.schema(
            [
                ("agent_ref", pa.struct([("name", pa.string())])),
                (TASK_KEY, pa.int64()),
                (ROLLOUT_KEY, pa.int64()),
                ("reward", pa.float64()),
            ]
        )
    rows = BufferRows(chunk, starts, ends)
    lines = np.flatnonzero(ends - starts > 0)
    if not len(lines):
        return None
    first, stop = int(starts[lines[0]]), int(ends[lines[-1]])
    if too_deep(chunk, starts[lines], ends[lines]):  # pyarrow would recurse past its stack
        return None
    try:
        table = pj.read_json(
            pa.BufferReader(pa.py_buffer(chunk).slice(first, stop - first)),  # type: ignore[arg-type]
            read_options=pj.ReadOptions(block_size=4 << 20),
            parse_options=pj.ParseOptions(explicit_schema=_SCHEMA, unexpected_field_behavior="ignore"),
            memory_pool=pa.system_memory_pool(),
        )
        table.validate(full=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, UnicodeDecodeError):
        return None
    if table.num_rows != len(lines):
        lines = _nonblank(rows, lines)
        if table.num_rows != len(lines):
            return None
    return _plain_rows(table, lines)


def _nonblank(rows: Any, lines: np.ndarray) -> np.ndarray:
    return np.asarray([i for i in lines.tolist() if rows[i].strip()], dtype=np.int64)


def _plain_rows(table: Any, lines: np.ndarray) -> tuple[Any, ...]:
    import pyarrow.compute as pc

    names = pc.struct_field(table.column("agent_ref"), "name")
    has_name = pc.fill_null(pc.utf8_length(names), 0).to_numpy(zero_copy_only=False) > 0
    encoded = pc.dictionary_encode(pc.fill_null(names, "")).combine_chunks()
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    task = pc.fill_null(table.column(TASK_KEY), -1).to_numpy(zero_copy_only=False)
    rollout = pc.fill_null(table.column(ROLLOUT_KEY), -1).to_numpy(zero_copy_only=False)
    scored = pc.is_valid(table.column("reward")).to_numpy(zero_copy_only=False)
    ok = has_name & scored & (task >= 0) & (rollout >= 0)
    return lines, [str(x) for x in encoded.dictionary.to_pylist()], codes, task, rollout, ok


def _refuse_repeats(
    path: Path, agents: list[str], code: np.ndarray, task: np.ndarray, rollout: np.ndarray, line: np.ndarray
) -> None:
    """One (agent, task, rollout) on two lines of the input: an error naming both, before anything
    is written (resuming would take the second line as done by the first)."""
    order = np.lexsort((line, rollout, task, code))
    c, t, r = code[order], task[order], rollout[order]
    same = np.flatnonzero((c[1:] == c[:-1]) & (t[1:] == t[:-1]) & (r[1:] == r[:-1]))
    if not len(same):
        return
    violations = [
        FieldViolation(
            "(agent_ref.name, _ng_task_index, _ng_rollout_index)",
            f"({agents[int(c[i])]!r}, {int(t[i])}, {int(r[i])}) again (first at line {int(line[order[i]])}): "
            "two lines hold this rollout",
            int(line[order[i + 1]]),
            row_name="line",
        )
        for i in same[:10].tolist()
    ]
    raise InvalidInputError(
        f"{path}: rollouts given twice (remove the repeats from the input; nothing was written or skipped)",
        violations,
    )
