"""Reading a run's files into digest columns: each file cut into byte ranges on line ends,
the ranges checked by worker processes when the run is large (in one process when small), and
the parts joined in file order so the result is the one a single pass gives.

A worker numbers lines and records from the start of its range. The few things that depend on
where a line is in the whole run (an unreadable line's id, a task taken from the record's
position, an error naming its line) are noted by the worker and put right here."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_all_start_methods, get_context
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

import orjson

from gym_metrics.health._checks import ROLLOUT, TASK, check_rollout
from gym_metrics.health._table import Table

PARALLEL_BYTES = 16 << 20
"""Runs smaller than this are read in this process (starting workers costs more than they save:
a fork about 10 ms; measured, 8 MB of 19 KB rows took as long either way)."""
SPAWN_FACTOR = 8
"""A spawned worker imports the package first (about 0.4 s): runs need this many times more."""
MAX_WORKERS = 8
RANGES_PER_WORKER = 4
"""Each worker takes several ranges, so one slow range does not leave the others idle."""


@dataclass
class Part:
    """What a worker found in one byte range of one file."""

    table: Table
    lines: int = 0
    """Physical lines read (blank ones too)."""
    records: int = 0
    unreadable: dict[int, tuple[int, str]] = field(default_factory=dict)
    """Row -> (its line in the range, the parse error)."""
    from_position: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    """Rows without a task index (their task is their position in the run) -> (the id the
    record gives, if any; its rollout index as written)."""
    failed_at: tuple[int, int] | None = None
    """(line in the range, byte offset) of a line whose check raised: the run fails there."""


def _agent(record: dict[str, Any]) -> str | None:
    ref = record.get("agent_ref")
    name = ref.get("name") if isinstance(ref, dict) else None
    return name if isinstance(name, str) else None


def _parse(line: bytes) -> tuple[dict[str, Any], str | None]:
    """The record, or {} and why not (NeMo Gym's error names)."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return {}, "JSONDecodeError"
    return (record, None) if isinstance(record, dict) else ({}, "ValueError")


def check_range(path: str, source: int, start: int, end: int, ignored: frozenset[str]) -> Part:
    """Every record whose line starts in [start, end) of `path`, checked."""
    part = Part(Table())
    table = part.table
    with open(path, "rb") as f:
        f.seek(start)
        pos = start
        for line in f:
            if pos >= end:
                break
            here, pos = pos, pos + len(line)
            part.lines += 1
            stripped = line.strip()
            if not stripped:
                continue
            record, error = _parse(stripped)
            try:
                d = check_rollout(record, error, (path, source, part.lines, part.records), ignored)
            except Exception:  # raised again where the run's own numbering is known
                part.failed_at = (part.lines, here)
                break
            if error:
                part.unreadable[len(table)] = (part.lines, error)
            elif TASK not in record:
                raw = record.get("ng_trajectory")
                given = record.get("_ng_rollout_id") or (raw.get("rollout_id") if isinstance(raw, dict) else None)
                part.from_position[len(table)] = (given, record.get(ROLLOUT, 0))
            table.add(d, _agent(record))
            part.records += 1
    table.freeze()
    return part


def _check_range(args: tuple[str, int, int, int, frozenset[str]]) -> Part:
    return check_range(*args)


def _cuts(path: Path, parts: int) -> list[tuple[int, int]]:
    """[start, end) byte ranges of `path`, each starting at a line's start."""
    size = path.stat().st_size
    starts = [0]
    with path.open("rb") as f:
        for k in range(1, parts):
            f.seek(max(size * k // parts - 1, starts[-1]))
            f.readline()  # to the end of the line the cut falls in
            at = f.tell()
            if starts[-1] < at < size:
                starts.append(at)
    return list(zip(starts, [*starts[1:], size]))


def _context() -> BaseContext:
    """fork where it is safe (Linux, gRPC not loaded: its threads do not survive a fork), as
    NeMo Gym's pool forks; else spawn (a collect's process: its entry points guard __main__)."""
    safe = sys.platform == "linux" and "grpc" not in sys.modules and "fork" in get_all_start_methods()
    return get_context("fork" if safe else "spawn")


def worker_count(workers: int | None) -> int:
    """`workers`, or one per usable core (at most MAX_WORKERS), as NeMo Gym counts them."""
    if workers is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return max(1, min(cores, MAX_WORKERS))
    if workers < 1:
        raise ValueError("workers must be at least 1")
    return workers


def read_run(paths: Sequence[Path], ignored: frozenset[str], workers: int) -> Table:
    """Every record of `paths`, checked, as one table in the files' order."""
    total = sum(p.stat().st_size for p in paths)
    context = _context()
    parallel = workers > 1 and total >= PARALLEL_BYTES * (1 if context.get_start_method() == "fork" else SPAWN_FACTOR)
    jobs: list[tuple[str, int, int, int, frozenset[str]]] = []
    for source, path in enumerate(paths):
        ranges = _cuts(path, max(1, round(workers * RANGES_PER_WORKER * path.stat().st_size / max(total, 1)))) if parallel else [(0, path.stat().st_size)]
        jobs += [(str(path), source, start, end, ignored) for start, end in ranges]
    if not parallel:
        return Table.concat(_placed(((job, check_range(*job)) for job in jobs), ignored))
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=context) as pool:
        return Table.concat(_placed(zip(jobs, pool.map(_check_range, jobs)), ignored))


def _placed(done: Iterable[tuple[tuple[str, int, int, int, frozenset[str]], Part]], ignored: frozenset[str]) -> Iterator[Table]:
    """The parts in order, each line and position counted from the start of its file and run."""
    line_base: dict[int, int] = {}
    ordinal = 0
    for (path, source, _, _, _), part in done:
        first_line = line_base.get(source, 0)
        if part.failed_at is not None:
            _raise_at(path, source, first_line + part.failed_at[0], ordinal + part.records, part.failed_at[1], ignored)
        table = part.table
        for row, (given, rollout) in part.from_position.items():
            task = table.task[row] = table.task[row] + ordinal
            rollout_id = str(given) if given else f"{task}-{rollout}"
            table.ids[row] = None if rollout_id == f"{task}-{table.rollout[row]}" else rollout_id
        for row, (line, error) in part.unreadable.items():
            table.put(row, check_rollout({}, error, (path, source, first_line + line, ordinal + row), ignored))
        line_base[source] = first_line + part.lines
        ordinal += part.records
        yield table


def _raise_at(path: str, source: int, line: int, ordinal: int, offset: int, ignored: frozenset[str]) -> None:
    """The line's check again, numbered as in the whole run: it raises what a single pass raises."""
    with open(path, "rb") as f:
        f.seek(offset)
        stripped = f.readline().strip()
    record, error = _parse(stripped)
    check_rollout(record, error, (path, source, line, ordinal), ignored)
    raise RuntimeError(f"{path} line {line}: the health check failed in a worker but not again here")
