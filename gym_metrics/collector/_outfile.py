"""The collector's output JSONL: appended as rollouts complete, repaired and indexed on resume."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from gym_metrics.collector._keys import TaskLines
from gym_metrics.rollouts import read_rollouts, too_deep
from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError

RolloutKey = tuple[str, int, int]
"""(agent, task, rollout)."""
TERMINAL_KEY = "_ng_failure_terminal"
"""A failures sidecar row's mark that its rollout is never to be run again (NeMo Gym's)."""
DEFAULT_MAX_ROLLOUT_ATTEMPTS = 3
"""NeMo Gym's cap on a rollout's attempts over resumed runs (`NEMO_GYM_MAX_ROLLOUT_ATTEMPTS`)."""
MAX_ATTEMPTS_ENV = "NEMO_GYM_MAX_ROLLOUT_ATTEMPTS"


def max_rollout_attempts_from_env() -> int:
    """NeMo Gym's `NEMO_GYM_MAX_ROLLOUT_ATTEMPTS` (a positive integer), else 3. A value that is
    not one is refused, where NeMo Gym warns and takes 3."""
    raw = os.environ.get(MAX_ATTEMPTS_ENV, "")
    if not raw:
        return DEFAULT_MAX_ROLLOUT_ATTEMPTS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise InvalidInputError(f"{MAX_ATTEMPTS_ENV} is not a positive integer", [FieldViolation(MAX_ATTEMPTS_ENV, f"got {raw!r}")])
    return value


@dataclass
class Retries:
    """What `--resume` found in the failures sidecar, as NeMo Gym's resume reads it: each
    rollout not in the output with a failed attempt there is run again (its row then carries
    `_ng_attempt_index`, its failed attempts so far), unless an attempt was terminal or it has
    had `max_rollout_attempts` of them."""

    again: dict[RolloutKey, int] = field(default_factory=dict)
    """Rollouts run again -> their failed attempts so far."""
    given_up: set[RolloutKey] = field(default_factory=set)
    """Rollouts not run again: `terminal` of them had a terminal attempt, the rest had every attempt allowed."""
    terminal: int = 0
    attempts: int = 0
    """Failed attempts in the sidecar, of rollouts not in the output."""
    unnamed: dict[tuple[int, int], tuple[int, bool]] = field(default_factory=dict)
    """(task, rollout) -> failed attempts and whether one was terminal, of the sidecar's rows
    that name no agent (and no --agent given): NeMo Gym keys its sidecar on the two indices
    alone, so they count for that rollout of whichever agent (`attempt`)."""
    max_attempts: int = DEFAULT_MAX_ROLLOUT_ATTEMPTS

    def attempt(self, key: RolloutKey) -> int | None:
        """The failed attempts so far of a rollout not in `OutputFile.done` (0: none), with
        the rows naming no agent counted in; None: those make it terminal or spent."""
        extra = self.unnamed.get(key[1:])
        if extra is None:
            return self.again.get(key, 0)
        count = self.again.get(key, 0) + extra[0]
        return None if extra[1] or count >= self.max_attempts else count


class OutputFile:
    """Append-only JSONL of verified rollouts; every write is flushed to the OS, so a killed
    run loses at most the line it was writing, which `open(resume=True)` cuts off. (No fsync:
    surviving a power cut is not worth seconds per million rows here.)"""

    def __init__(
        self, path: Path, resume: bool, default_agent: str | None = None, reverifying: bool = False,
        max_rollout_attempts: int = DEFAULT_MAX_ROLLOUT_ATTEMPTS,
    ) -> None:  # fmt: skip
        """`resume`: continue `path`: the rollouts in it are done, and those of its failures
        sidecar are run again or not by NeMo Gym's rule (Retries); with `reverifying`
        (`--reverify-failed`, whose input the sidecar is) the output's alone are done."""
        self.path = path
        self.done: set[RolloutKey] = set()
        """Rollouts not to run: written to the output, or given up (Retries)."""
        self.written: set[RolloutKey] = set()
        self.retries = Retries()
        self.repaired_bytes = 0
        if resume and path.exists():
            self.repaired_bytes = _cut_partial_last_line(path)
            self.written = _keys_in(path, default_agent)
            self.done = set(self.written)
        elif path.exists() and path.stat().st_size:
            raise GymMetricsError(f"{path} exists and is not empty: pass --resume to continue it, or remove it")
        sidecar = failures_path_for(path)
        if resume and not reverifying and sidecar.exists():
            self.repaired_bytes += _cut_partial_last_line(sidecar)
            self.retries = _retries(sidecar, self.written, default_agent, max_rollout_attempts)
            self.done |= self.retries.given_up
        path.parent.mkdir(parents=True, exist_ok=True)
        self.task_lines = TaskLines(path, resume)
        self._f: IO[bytes] = path.open("ab")

    def write(self, lines: list[bytes]) -> None:
        self.task_lines.flush()  # (the lines of the tasks on disk before their rows)
        self._f.write(b"".join(lines))
        self._f.flush()

    def close(self) -> None:
        self.task_lines.close()
        self._f.close()


def failures_path_for(output: Path) -> Path:
    """`run.jsonl` -> `run_failures.jsonl`: NeMo Gym's sidecar of rollouts dropped from the score."""
    return output.with_name(output.stem + "_failures.jsonl")


class FailuresFile:
    """The failures sidecar, as NeMo Gym keeps it: one row per failed attempt whose verify
    answer names a failure class (`_ng_failure_class`, e.g. a judge that failed), out of the
    rollouts file and so out of the metrics. Opened on the first such row; a fresh run refuses
    a sidecar left by another, as it refuses its output."""

    def __init__(self, output: Path, resume: bool) -> None:
        self.path = failures_path_for(output)
        if not resume and self.path.exists() and self.path.stat().st_size:
            raise GymMetricsError(f"{self.path} exists and is not empty: pass --resume to continue it, or remove it")
        self._f: IO[bytes] | None = None

    def write(self, lines: list[bytes]) -> None:
        if self._f is None:
            self._f = self.path.open("ab")
        self._f.write(b"".join(lines))
        self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()


def _cut_partial_last_line(path: Path) -> int:
    """Truncate an unterminated last line (a write cut short); return the bytes removed."""
    size = path.stat().st_size
    if size == 0:
        return 0
    with path.open("rb+") as f:
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return 0
        # scan back for the previous newline
        pos, block = size, 1 << 16
        keep = 0
        while pos > 0:
            start = max(0, pos - block)
            f.seek(start)
            chunk = f.read(pos - start)
            i = chunk.rfind(b"\n")
            if i >= 0:
                keep = start + i + 1
                break
            pos = start
        f.truncate(keep)
        return size - keep


def sidecar_key(row: Any, default_agent: str | None) -> RolloutKey | None:
    """A failures sidecar row's rollout (None: a row without both indices, which NeMo Gym's
    resume passes over too)."""
    if not isinstance(row, dict):
        return None
    task, rollout = row.get("_ng_task_index"), row.get("_ng_rollout_index")
    if not isinstance(task, int) or not isinstance(rollout, int):
        return None
    ref = row.get("agent_ref")
    agent = ref.get("name") if isinstance(ref, dict) and ref.get("name") else default_agent or ""
    return str(agent), task, rollout


def _sidecar_rows(path: Path) -> list[Any]:
    rows = []
    with path.open("rb") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(orjson.loads(line))
                except orjson.JSONDecodeError as exc:
                    raise GymMetricsError(f"{path} line {number}: not JSON ({exc}); --resume reads every line of the failures sidecar") from None
    return rows


def _sidecar_attempts(path: Path, default_agent: str | None) -> list[tuple[RolloutKey | None, bool]]:
    """Each sidecar row's rollout (None: no indices) and whether it is terminal, read column-wise
    (its other fields, a failed rollout's whole response, never parsed); a file that reader
    cannot take (a field of another type) row by row."""
    import pyarrow as pa
    import pyarrow.json as pj

    schema = pa.schema([("agent_ref", pa.struct([("name", pa.string())])), ("_ng_task_index", pa.int64()),
                        ("_ng_rollout_index", pa.int64()), (TERMINAL_KEY, pa.bool_())])  # fmt: skip
    data = path.read_bytes()  # a sidecar holds the failed rollouts only
    try:
        if too_deep(data, np.zeros(1, np.int64), np.array([len(data)])):  # pyarrow would recurse past its stack
            raise pa.ArrowInvalid("nested too deeply")
        table = pj.read_json(pa.BufferReader(data), read_options=pj.ReadOptions(block_size=4 << 20),  # type: ignore[arg-type]
                             parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"))  # fmt: skip
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, UnicodeDecodeError):
        return [(sidecar_key(row, default_agent), bool(row.get(TERMINAL_KEY)) if isinstance(row, dict) else False) for row in _sidecar_rows(path)]
    names = [ref.get("name") if ref else None for ref in table.column("agent_ref").to_pylist()]
    tasks, rollouts = table.column("_ng_task_index").to_pylist(), table.column("_ng_rollout_index").to_pylist()
    flags = table.column(TERMINAL_KEY).to_pylist()
    fallback = default_agent or ""
    return [((str(n or fallback), t, r) if t is not None and r is not None else None, bool(f)) for n, t, r, f in zip(names, tasks, rollouts, flags)]


def _retries(path: Path, written: set[RolloutKey], default_agent: str | None, max_attempts: int) -> Retries:
    """NeMo Gym's resume rule over the sidecar `path` (Retries)."""
    attempts: dict[RolloutKey, int] = {}
    terminal: set[RolloutKey] = set()
    unnamed: dict[tuple[int, int], tuple[int, bool]] = {}
    for key, is_terminal in _sidecar_attempts(path, default_agent):
        if key is not None and not key[0]:  # no agent_ref.name and no --agent
            count, was_terminal = unnamed.get(key[1:], (0, False))
            unnamed[key[1:]] = (count + 1, was_terminal or is_terminal)
            continue
        if key is None or key in written:
            continue
        attempts[key] = attempts.get(key, 0) + 1
        if is_terminal:
            terminal.add(key)
    again = {key: n for key, n in attempts.items() if key not in terminal and n < max_attempts}
    return Retries(again, set(attempts) - set(again), len(terminal), sum(attempts.values()) + sum(n for n, _ in unnamed.values()), unnamed, max_attempts)


def first_attempts(sidecar: Path, aside: Path, default_agent: str | None) -> None:
    """`sidecar` moved to `aside` (through a temporary file renamed into place, then the sidecar
    removed), each rollout's first row only (a row without indices kept as it is)."""
    seen: set[RolloutKey] = set()
    partial = aside.with_name(aside.name + ".partial")
    with sidecar.open("rb") as source, partial.open("wb") as target:
        for line in source:
            if line.strip():
                try:
                    key = sidecar_key(orjson.loads(line), default_agent)
                except orjson.JSONDecodeError:
                    key = None  # (the input's reader names the line)
                if key is not None and key in seen:
                    continue
                if key is not None:
                    seen.add(key)
            target.write(line)
    os.replace(partial, aside)
    sidecar.unlink()


def _keys_in(path: Path, default_agent: str | None = None) -> set[RolloutKey]:
    """Every (agent, task, rollout) already written (`default_agent`: of rows without one)."""
    if path.stat().st_size == 0:
        return set()
    done: set[RolloutKey] = set()
    for agent, cols in read_rollouts(path, on_bad_line="fail", default_agent=default_agent).agents.items():
        done.update((agent, t, r) for t, r in zip(cols.task_index.tolist(), cols.rollout_index.tolist()))
    return done
