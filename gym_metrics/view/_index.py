"""One rollouts file as the viewer sees it: where each line starts, and per row the columns its
lists filter on (agent, task, rollout, reward, error, health verdict), read by the project's
columnar reader a block at a time.

The index grows: `refresh()` reads only the bytes written since the last one (whole lines), so
a collect in progress is followed as it writes, and a 1M-row file is usable while the rest is
read. Queries read an immutable snapshot, swapped in under a lock, so a request never sees half
a block. Memory is the columns (about 45 bytes a row), never the rows: a row is read from the
file by its offset when it is opened.
"""

from __future__ import annotations

import mmap
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import orjson

from gym_metrics._util.jsonio import loads
from gym_metrics.health import verdicts_cover
from gym_metrics.rollouts import ERROR_KINDS, read_rollouts

BLOCK_BYTES = 64 << 20
"""Bytes read per step of indexing (whole lines; one longer line is read whole)."""
MAX_BAD_LINES = 1000
"""Bad lines remembered (with their reason) per file; the count goes on."""
HEAD_BYTES = 256
VERDICTS = ("", "healthy", "unhealthy", "unobserved")
"""Verdict codes: 0 = no verdict on record."""


@dataclass(frozen=True)
class Columns:
    """The indexed rows, in file order (numpy arrays of one length)."""

    line: np.ndarray
    agent: np.ndarray
    task: np.ndarray
    rollout: np.ndarray
    reward: np.ndarray
    """NaN where the row has no numeric reward."""
    error: np.ndarray
    """0 = verified, else 1 + the index of its kind in ERROR_KINDS."""
    verdict: np.ndarray
    """The health verdict on record (VERDICTS), 0 without one."""
    masked: np.ndarray
    """True where the row is masked (`mask_sample`): shown, but out of every statistic."""

    @staticmethod
    def empty() -> Columns:
        i8 = np.zeros(0, np.int64)
        return Columns(i8, np.zeros(0, np.int32), i8, i8, np.zeros(0), np.zeros(0, np.int8), np.zeros(0, np.int8), np.zeros(0, bool))

    def measured(self, zero_agents: np.ndarray | None = None) -> np.ndarray:
        """The rewards the metrics file counts: NaN where the row has none, is masked, or failed
        (a failed verify's reward is left out, as `aggregate` leaves it out); 0 where it failed
        and its agent's code is True in `zero_agents` (the file counted failures as 0:
        `aggregate --count-errors-as-zero`), masked or not."""
        failed = self.error != 0
        reward = np.where(self.masked | failed, np.nan, self.reward)
        if zero_agents is not None and zero_agents.any():
            reward[failed & zero_agents[self.agent]] = 0.0
        return reward

    def __len__(self) -> int:
        return len(self.line)

    def take(self, idx: np.ndarray) -> Columns:
        return Columns(*(getattr(self, f)[idx] for f in _FIELDS))


_FIELDS = ("line", "agent", "task", "rollout", "reward", "error", "verdict", "masked")


@dataclass(frozen=True)
class Indexed:
    """What one refresh left: the columns, the agents' names (by code), the line starts."""

    columns: Columns
    agents: tuple[str, ...]
    starts: np.ndarray
    """starts[k]: the byte offset of line k + 1; starts[-1]: the end of the last whole line."""
    bad_lines: tuple[tuple[int, str], ...] = ()
    bad_count: int = 0
    size: int = 0
    """Bytes indexed (whole lines)."""
    file_size: int = 0
    """The file's size when last looked at (bigger than `size` while a line is being written)."""

    @property
    def lines(self) -> int:
        return len(self.starts) - 1


@dataclass
class _Verdicts:
    path: Path | None
    mtime: float = -1.0
    keys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    codes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))


_ROLLOUT_BITS = 24
"""A (task, rollout) key is one int64: the rollout in its low bits, the task above them."""
_KEYED = (1 << (63 - _ROLLOUT_BITS), 1 << _ROLLOUT_BITS)
"""The largest |task| and rollout (exclusive) a key holds."""


def _key(task: np.ndarray, rollout: np.ndarray) -> np.ndarray:
    return (task.astype(np.int64) << _ROLLOUT_BITS) + rollout.astype(np.int64)


class RunIndex:
    """The growing index of one rollouts file (see the module's docstring)."""

    def __init__(self, path: Path, verdicts: Path | None = None) -> None:
        self.path = path
        self._verdicts = _Verdicts(verdicts)
        self._lock = threading.Lock()  # one refresh at a time
        self._snapshot = Indexed(Columns.empty(), (), np.zeros(1, np.int64))
        self._inode: int | None = None
        self._first = b""
        """The file's first bytes when indexing began: a file replaced by one as long is told apart."""
        self._last = b""
        """The last HEAD_BYTES indexed: a file written over in place changes them."""
        self.error = ""
        """Why the last refresh failed (the file went away, could not be read), or empty."""

    @property
    def snapshot(self) -> Indexed:
        return self._snapshot

    def refresh(self, max_bytes: int | None = None) -> Indexed:
        """Index the whole lines written since the last refresh (at most `max_bytes` of them, if
        given); a file that shrank or was replaced is indexed again from its start. A file gone
        raises FileNotFoundError, its rows dropped."""
        with self._lock:
            snap = self._snapshot
            try:
                stat = self.path.stat()
            except FileNotFoundError:  # gone: its rows go (they cannot be opened), and the run says why
                self._snapshot = self._with_verdicts(Indexed(Columns.empty(), (), np.zeros(1, np.int64)))
                self._inode, self._first, self._last = None, b"", b""
                raise
            size, inode = stat.st_size, stat.st_ino
            if size < snap.size or inode != self._inode or (snap.size and (self._head(len(self._first)) != self._first or self._tail_of(snap.size) != self._last)):
                # it shrank, or another file stands under that name, or was written over in place: read it afresh
                snap = self._snapshot = Indexed(Columns.empty(), (), np.zeros(1, np.int64))
                self._inode, self._first, self._last = inode, b"", b""
            budget = max_bytes if max_bytes is not None else size
            while snap.size < size and budget > 0:
                grown = self._read_block(snap, size, min(BLOCK_BYTES, budget))
                if grown is None:
                    break
                budget -= grown.size - snap.size
                snap = grown
            if not self._first and snap.size:
                self._first = self._head(min(HEAD_BYTES, snap.size))
            self._last = self._tail_of(snap.size)
            snap = self._with_verdicts(replace(snap, file_size=size))
            self._snapshot = snap
            return snap

    def _head(self, n: int) -> bytes:
        with self.path.open("rb") as f:
            return f.read(n)

    def _tail_of(self, end: int) -> bytes:
        """The HEAD_BYTES before `end`: the last indexed bytes, which a copy over the file in place
        (same inode, same head, longer) changes."""
        if not end:
            return b""
        with self.path.open("rb") as f:
            f.seek(max(0, end - HEAD_BYTES))
            return f.read(end - max(0, end - HEAD_BYTES))

    def _read_block(self, snap: Indexed, size: int, want: int) -> Indexed | None:
        start = snap.size
        with self.path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            size = min(size, len(mm))
            if 0 < start < size and mm[start - 1] != 10 and mm[start] == 10:
                start += 1  # the newline a last line taken whole without one got since: not a line of its own
            end = mm.rfind(b"\n", start, min(size, start + want))
            if end < 0:
                end = mm.find(b"\n", start, size)  # one line longer than a block
                if end < 0 and not _whole_line(mm[start:size]):
                    return None  # the last line is still being written
                if end < 0:  # a file that ends without a newline: its last line is whole JSON
                    end = size - 1
            buf = np.frombuffer(mm, dtype=np.uint8, count=end + 1 - start, offset=start)
            starts = start + 1 + np.flatnonzero(buf == 10).astype(np.int64)
            if buf[-1] != 10:  # the unterminated last line: it ends where the file does
                starts = np.append(starts, end + 1)
            del buf  # the mmap closes only without views into it
        first_line = snap.lines + 1
        read = read_rollouts(self.path, on_bad_line="skip", default_agent="", keep_rows=False, span=(start, end + 1), first_line=first_line)
        agents = list(snap.agents)
        parts = []
        for name, cols in read.agents.items():
            if name not in agents:
                agents.append(name)
            n = len(cols)
            reward = cols.fields.get("reward")
            # a non-finite reward is no measurement, as the metrics file leaves it out of the stats
            values = np.where(reward.present & np.isfinite(reward.values), reward.values, np.nan) if reward is not None else np.full(n, np.nan)
            labels = cols.row_labels if cols.row_labels is not None else np.arange(first_line, first_line + n)
            parts.append(Columns(
                labels.astype(np.int64), np.full(n, agents.index(name), np.int32), cols.task_index.astype(np.int64),
                cols.rollout_index.astype(np.int64), values.astype(np.float64),
                (cols.errors if cols.errors is not None else np.zeros(n)).astype(np.int8), np.zeros(n, np.int8),
                np.asarray(cols.masked, dtype=bool),
            ))  # fmt: skip
        new = _concat([snap.columns, *parts], order_from=len(snap.columns))
        bad = list(snap.bad_lines)
        bad += [(b.line, f"{b.field}: {b.reason}") for b in read.bad_lines[: MAX_BAD_LINES - len(bad)]]
        return Indexed(new, tuple(agents), np.concatenate([snap.starts, starts]), tuple(bad),
                        snap.bad_count + len(read.bad_lines), end + 1, size)  # fmt: skip

    def _with_verdicts(self, snap: Indexed) -> Indexed:
        v = self._verdicts
        if v.path is None:
            return snap
        try:
            mtime = v.path.stat().st_mtime
        except FileNotFoundError:
            mtime = -1.0
        changed = mtime != v.mtime
        if changed:
            v.mtime = mtime
            ours = mtime >= 0 and verdicts_cover(self.path, v.path)  # a folder's verdicts may be another file's
            v.keys, v.codes = _read_verdicts(v.path) if ours else (np.zeros(0, np.int64), np.zeros(0, np.int8))
        cols = snap.columns
        if not len(v.keys) or not len(cols):
            return snap if not changed else replace(snap, columns=replace(cols, verdict=np.zeros(len(cols), np.int8)))
        keys = _key(cols.task, cols.rollout)
        at = np.minimum(np.searchsorted(v.keys, keys), len(v.keys) - 1)
        verdict = np.where(v.keys[at] == keys, v.codes[at], 0).astype(np.int8)
        return replace(snap, columns=replace(cols, verdict=verdict))

    def row_bytes(self, line: int) -> bytes:
        """The text of line `line` (1-based) as indexed; IndexError past the indexed lines."""
        starts = self._snapshot.starts
        if not 1 <= line < len(starts):
            raise IndexError(line)
        begin, end = int(starts[line - 1]), int(starts[line])
        with self.path.open("rb") as f:
            f.seek(begin)
            return f.read(end - begin)


def _concat(parts: list[Columns], order_from: int) -> Columns:
    parts = [p for p in parts if len(p)]
    if not parts:
        return Columns.empty()
    if len(parts) == 1:
        return parts[0]
    whole = Columns(*(np.concatenate([getattr(p, f) for p in parts]) for f in _FIELDS))
    tail = np.argsort(whole.line[order_from:], kind="stable") + order_from  # agents' rows back in file order
    return whole.take(np.concatenate([np.arange(order_from), tail]))


def _read_verdicts(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """NeMo Gym's rollout_verdicts.jsonl as sorted (task, rollout) keys and verdict codes; lines
    that are not verdicts are skipped (the file is evidence shown, not input scored)."""
    tasks, rollouts, codes = [], [], []
    with path.open("rb") as f:
        for line in f:
            try:
                row = orjson.loads(line)
                task, rollout, verdict = row["_ng_task_index"], row["_ng_rollout_index"], VERDICTS.index(row["verdict"])
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                continue
            if isinstance(task, int) and isinstance(rollout, int) and abs(task) < _KEYED[0] and 0 <= rollout < _KEYED[1] and verdict:
                # a line past what a key holds is skipped alone (it overflowed int64 and hid every verdict)
                tasks.append(task)
                rollouts.append(rollout)
                codes.append(verdict)
    keys = _key(np.array(tasks, np.int64), np.array(rollouts, np.int64))
    order = np.argsort(keys, kind="stable")
    return keys[order], np.array(codes, np.int8)[order]


def error_name(code: int) -> str:
    return "" if code == 0 else ERROR_KINDS[code - 1]


def _whole_line(tail: bytes) -> bool:
    """True when a file's last bytes, with no newline after them, are one whole JSON line (a
    finished file without a final newline), not a line still being written."""
    if not tail.strip():
        return False
    try:
        loads(tail)
    except ValueError:
        return False
    return True
