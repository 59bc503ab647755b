"""`collect --processes N`: the input's rollouts sharded over N collector processes on this
machine, each with its own connections and policy pool, then one output, exactly.

A rollout belongs to shard `task % N` (all rollouts of a task in one shard). Each shard process
is this same command with `--shard I/N`: it reads the whole input (so every key is assigned as
one process assigns it), collects only its own rollouts into `.<output>.shards/I-of-N.jsonl`
(its failures sidecar beside it), always with `--resume`, and writes what it counted to
`I-of-N.stats.json`; it does not aggregate. The parent draws one progress line from the shard
files' growth, starts a shard that died again (once: it resumes its own file), and, when every
shard finished, writes the rollouts file (and the failures sidecar) with the rows sorted by
(task, rollout, agent), through a temporary file renamed into place, then aggregates it once.
So the metrics file is byte for byte one process's (aggregation sorts by key), and the rollouts
file holds one process's lines in a fixed order (one process writes them as they complete).
A shard that fails twice stops the run with its log's last lines; nothing is written but the
shard files, which `--resume` takes up. `--resume` also takes up an output a run of any kind
left: its rows go to their shards first.
"""

from __future__ import annotations

import json
import mmap
import os
import signal
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from gym_metrics._util.exclusive import Exclusive, hold_exclusive
from gym_metrics._util.lifetime import PARENT_ENV, die_with_parent, with_parent
from gym_metrics._util.progress import ProgressLine
from gym_metrics.collector._environments import Environments
from gym_metrics.collector._keys import InputChanged, carry_task_lines, task_lines_path
from gym_metrics.collector._outfile import OutputFile, failures_path_for
from gym_metrics.collector._shard import Shard, refuse_other_shard_count, shard_dir, stats_path
from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError

RETRIES = 1
"""Times a shard process that died is started again (it resumes its own file)."""
POLL_S = 0.25


def write_stats(path: Path, stats: dict[str, Any]) -> None:
    """A shard's counts, written when it finished (the parent adds them up)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(orjson.dumps(stats))
    os.replace(tmp, path)


def child_argv(argv: Sequence[str], shard: Shard, final: Path) -> list[str]:
    """This command's own arguments for shard `shard`: without --processes, its own output and
    --resume (a shard always continues its file); in a run not resumed, with one attempt a
    rollout, so a shard started again after a crash does not run its failed rollouts again (as a
    run never cut)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--processes":
            skip = True
            continue
        if arg.startswith("--processes="):
            continue
        out.append(arg)
    once = [] if "--resume" in out else ["--max-rollout-attempts", "1"]
    return [*out, "--shard", f"{shard.index}/{shard.count}", "--output", str(shard.output(final)), "--resume", *once]


class _Lines:
    """Lines in a growing file, counted by what was added since the last look."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.count = path, 0, 0

    def look(self) -> int:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return self.count
        self.offset += len(chunk)
        self.count += chunk.count(b"\n")
        return self.count


class ShardProgress(ProgressLine):
    """One progress line over every shard: the rows their files hold."""

    def __init__(self, total: int | None, files: list[_Lines], watch: Callable[[int], None] | None = None) -> None:
        """`watch(rows)`: told the rows written at each look (collect --pushgateway's pushes)."""
        super().__init__(total, name="collect")
        self.files = files
        self.watch = watch
        self._done = 0

    @property
    def done(self) -> int:
        return self._done

    def look(self) -> None:
        self.set_done(sum(f.look() for f in self.files))

    def set_done(self, rows: int) -> None:
        self._done = rows
        self.tick()
        if self.watch is not None:
            self.watch(rows)

    def summary(self) -> str:
        return f"{self.head('rollouts')} | {len(self.files)} processes"


def redistribute(final: Path, shards: list[Shard], default_agent: str | None) -> int:
    """`--resume` of an output a run left: each of its rows appended to its shard's file unless
    the shard holds the key already, and each row of its failures sidecar to its shard's sidecar
    unless the shard holds that very line (every failed attempt counts: the shards' `--resume`
    then runs them again or not as one process's does, and the merge writes them back); the rows
    moved."""
    files = [OutputFile(s.output(final), True, default_agent) for s in shards]
    try:
        written = [file.written for file in files]
    finally:
        for file in files:
            file.close()
    sidecars = [failures_path_for(s.output(final)) for s in shards]
    held_lines = [set(p.read_bytes().splitlines(keepends=True)) if p.exists() else set() for p in sidecars]
    moved = _hand_out(final, [s.output(final) for s in shards], written, default_agent, shards[0])
    return moved + _hand_out(failures_path_for(final), sidecars, held_lines, default_agent, shards[0], by_line=True)


def _hand_out(source: Path, targets: list[Path], held: list[set[Any]], default_agent: str | None, shard: Shard, by_line: bool = False) -> int:
    """The complete lines of `source` whose key (`by_line`: the line itself) their shard's
    `held` lacks, appended to that shard's `targets` file and then held (`shard.owner` says
    which shard)."""
    if not source.exists() or not source.stat().st_size:
        return 0
    pending: list[list[bytes]] = [[] for _ in targets]
    with source.open("rb") as f:
        for number, line in enumerate(f, 1):
            if not line.endswith(b"\n"):
                break  # a line cut short by a kill: its rollout is collected again
            if not line.strip():
                continue
            try:
                agent, task, rollout = _key(line, default_agent)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:  # (orjson's JSONDecodeError is a ValueError)
                raise InvalidInputError(f"{source}: a line --resume cannot take up", [FieldViolation(f"line {number}", _why(exc))]) from None
            i = shard.owner(task, agent, f"{source} line {number}")
            what = line if by_line else (agent, task, rollout)
            if what not in held[i]:
                held[i].add(what)
                pending[i].append(line)
    for target, lines in zip(targets, pending):
        if lines:
            with target.open("ab") as out:
                out.write(b"".join(lines))
    return sum(map(len, pending))


def _why(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"{exc.args[0]}: missing"
    return f"not a rollout row with integer indices ({type(exc).__name__}: {exc})"


def _key(line: bytes, default_agent: str | None) -> tuple[str, int, int]:
    row = orjson.loads(line)
    ref = row.get("agent_ref")
    agent = ref.get("name") if isinstance(ref, dict) and ref.get("name") else default_agent or ""
    return str(agent), int(row["_ng_task_index"]), int(row["_ng_rollout_index"])


def open_shards(final: Path, count: int, *, resume: bool, default_agent: str | None, log: Callable[[str], None],
                environments: Environments | None = None) -> Exclusive:  # fmt: skip
    """Before the shards run: the folder checked (a run left it: --resume) and locked, a left
    output's rows handed to their shards (--resume), old stats gone. The lock (close it last)."""
    folder = shard_dir(final)
    if folder.exists() and not resume:
        raise GymMetricsError(f"{folder} holds the shards of a run that did not finish: pass --resume to continue it, or remove it")
    if not resume and final.exists() and final.stat().st_size:
        raise GymMetricsError(f"{final} exists and is not empty: pass --resume to continue it, or remove it")
    refuse_other_shard_count(final, count)
    folder.mkdir(parents=True, exist_ok=True)
    lock = _lock(folder)
    try:
        shards = [Shard(i, count, environments) for i in range(count)]
        if resume:
            moved = redistribute(final, shards, default_agent)
            if moved:
                log(f"collect: {moved:,} rows of {final} handed to their shards")
            for shard in shards:  # the lines the output's tasks were made from: each shard's resume checks them
                _carry_lines([final], shard.output(final))
        else:
            task_lines_path(final).unlink(missing_ok=True)  # a run not resumed records them again, as one process does
        for shard in shards:
            stats_path(shard.output(final)).unlink(missing_ok=True)
    except BaseException:
        lock.close()
        raise
    return lock


def close_shards(final: Path, count: int, default_agent: str | None) -> list[dict[str, Any]]:
    """Once every shard finished (its stats written): their stats, and their rows merged into
    `final` (merge_shards; call it holding the lock)."""
    stats = [json.loads(stats_path(Shard(i, count).output(final)).read_text()) for i in range(count)]
    merge_shards(final, count, default_agent)
    return stats


_INTERRUPTED = frozenset({130, 143, -signal.SIGINT, -signal.SIGTERM})
"""Exit codes of a shard stopped by Ctrl-C or SIGTERM (the CLI's, or the signal's own)."""


def run_shards(argv: Sequence[str], final: Path, count: int, total: int | None, *, resume: bool,
               default_agent: str | None, log: Callable[[str], None], stop: threading.Event | None = None,
               environments: Environments | None = None, watch: Callable[[int], None] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Start the shard processes, follow them, start a dead one again (RETRIES times), merge
    their files into `final` once all finished; their stats, else GymMetricsError naming the
    shard (module docstring). `stop` set (the run was interrupted): the shards are killed and
    KeyboardInterrupt raised, their files kept for --resume. `environments`: `count` shards
    over the environments (collector/_environments.py), as many for each."""
    shards = [Shard(i, count, environments) for i in range(count)]
    lock = open_shards(final, count, resume=resume, default_agent=default_agent, log=log, environments=environments)
    files = [_Lines(s.output(final)) for s in shards]
    progress = ShardProgress(total, files, watch)
    running: dict[int, tuple[subprocess.Popen[bytes], int]] = {}
    try:
        for shard in shards:
            running[shard.index] = (_start(argv, shard, final), 0)
        while running:
            time.sleep(POLL_S)
            if stop is not None and stop.is_set():
                raise KeyboardInterrupt
            progress.look()
            for index, (proc, tries) in list(running.items()):
                code = proc.poll()
                if code is None:
                    continue
                del running[index]
                shard = shards[index]
                if code == 0 and stats_path(shard.output(final)).exists():
                    continue
                if code in _INTERRUPTED:  # Ctrl-C reaches the whole process group: the user stops the run
                    raise KeyboardInterrupt
                if code in (2, 4) or tries >= RETRIES:  # bad input or no server fails again; a second death is reported
                    failed = GymMetricsError(f"{_named(shard)} failed (exit {code}); {_tail(shard.log(final))}"
                                             f"; its rows so far are kept in {shard_dir(final)}: fix the cause and run again with --resume")  # fmt: skip
                    failed.exit_code = code if code in (2, 3, 4) else 1  # type: ignore[attr-defined]  # the shard's own verdict
                    raise failed
                log(f"collect: {_named(shard)} stopped (exit {code}); starting it again (it resumes its file)")
                running[index] = (_start(argv, shard, final), tries + 1)
        return close_shards(final, count, default_agent)
    finally:
        for proc, _ in running.values():
            proc.kill()
            proc.wait()
        progress.look()
        progress.close()
        lock.close()


def _named(shard: Shard) -> str:
    where = f"shard {shard.index + 1} of {shard.count}"
    return where if shard.environments is None else f"{where} (environment: {shard.environments.agents(shard.environment)})"


def _lock(folder: Path) -> Exclusive:
    """The shards' lock, held while this run follows them: a second run on the same output
    (its --resume too) is refused instead of writing the same files."""
    return hold_exclusive(folder / "lock", f"another collect is running on {folder}'s output: wait for it, or stop it")


ATTEMPT = b"== gym-metrics: shard started\n"
"""Written to a shard's log before each start: its failure quotes only its own attempt's lines."""


def _start(argv: Sequence[str], shard: Shard, final: Path) -> subprocess.Popen[bytes]:
    log = shard.log(final).open("ab")
    try:
        log.write(ATTEMPT)
        log.flush()
        env = with_parent()
        return subprocess.Popen([sys.executable, "-m", "gym_metrics.cli", *child_argv(argv, shard, final)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)  # fmt: skip
    finally:
        log.close()


def _carry_lines(sources: list[Path], target: Path) -> None:
    try:
        carry_task_lines(sources, target)
    except InputChanged as exc:
        raise GymMetricsError(f"the task lines kept for {target} and its shards differ at task {exc.task}: they were collected "
                              f"from different inputs; remove {shard_dir(target)} and resume from {target} alone") from None  # fmt: skip


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").rpartition(ATTEMPT.decode())[2].strip().splitlines()
    except FileNotFoundError:
        return "no log"
    shown = [line for line in text if line.strip()][-lines:]
    return "its last lines: " + " | ".join(shown) if shown else "it printed nothing"


def merge_shards(final: Path, count: int, default_agent: str | None) -> None:
    """The shards' rows into `final` (and their failures into its sidecar), sorted by (task,
    rollout, agent), through a temporary file renamed into place; then the shards are removed."""
    shards = [Shard(i, count) for i in range(count)]
    _carry_lines([s.output(final) for s in shards], final)  # first: the rows never stand without them
    _write_sorted([s.output(final) for s in shards], final, default_agent)
    failures = [failures_path_for(s.output(final)) for s in shards]
    if any(p.exists() and p.stat().st_size for p in failures):
        _write_sorted([p for p in failures if p.exists()], failures_path_for(final), default_agent)
    shutil.rmtree(shard_dir(final))


def _write_sorted(parts: list[Path], target: Path, default_agent: str | None) -> None:
    agents: dict[str, int] = {}
    keys: list[np.ndarray] = []
    maps: list[mmap.mmap | bytes] = []
    for part, path in enumerate(parts):
        data: mmap.mmap | bytes = b""
        if path.exists() and path.stat().st_size:
            with path.open("rb") as f:
                data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        maps.append(data)
        ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10) + 1 if len(data) else np.zeros(0, np.int64)
        starts = np.concatenate(([0], ends[:-1])) if len(ends) else ends
        table = np.empty((len(ends), 6), np.int64)
        for n, (start, end) in enumerate(zip(starts.tolist(), ends.tolist())):
            agent, task, rollout = _key(data[start:end], default_agent)
            table[n] = (task, rollout, agents.setdefault(agent, len(agents)), part, start, end)
        keys.append(table)
    every = np.concatenate(keys) if keys else np.zeros((0, 6), np.int64)
    names = sorted(agents)
    rank = np.array([names.index(a) for a in agents], np.int64) if agents else np.zeros(0, np.int64)
    order = np.lexsort((rank[every[:, 2]] if len(every) else every[:, 2], every[:, 1], every[:, 0]))
    target = Path(os.path.realpath(target))  # through a symlink: the rows go where it points, beside which the temp file is
    tmp = target.with_name(f".{target.name}.merging")
    try:
        with tmp.open("wb") as out:
            buffer: list[bytes] = []
            for task, rollout, agent, part, start, end in every[order].tolist():
                buffer.append(maps[part][start:end])
                if len(buffer) >= 4096:
                    out.write(b"".join(buffer))
                    buffer.clear()
            out.write(b"".join(buffer))
    except OSError as exc:  # a full disk, a file size limit: the shards stay for --resume, no half file beside the output
        tmp.unlink(missing_ok=True)
        raise GymMetricsError(f"cannot write {target} from its shards: {exc.strerror or exc}; they are kept in "
                              f"{shard_dir(target)}: make room and run again with --resume") from None  # fmt: skip
    for data in maps:
        if isinstance(data, mmap.mmap):
            data.close()
    os.replace(tmp, target)


def added(stats: list[dict[str, Any]]) -> dict[str, Any]:
    """The shards' counts added up; their tasks per agent joined; bad lines in input order."""
    counts: dict[str, Any] = {}
    tasks: dict[str, set[int]] = {}
    bad: set[tuple[int, str, str]] = set()
    dropped: dict[str, int] = {}
    generation: dict[str, int] = {}
    served: dict[str, int] = {}
    for one in stats:
        for name, value in one["counts"].items():
            counts[name] = counts.get(name, 0) + value
        for agent, indices in one["tasks"].items():
            tasks.setdefault(agent, set()).update(indices)
        bad.update((int(line), str(field), str(reason)) for line, field, reason in one["bad_lines"])
        for into, given in ((dropped, one["dropped"]), (generation, one["generation_failures"]), (served, one.get("by_server", {}))):
            for name, value in given.items():
                into[name] = into.get(name, 0) + value
    return {"counts": counts, "tasks": tasks, "bad_lines": sorted(bad), "dropped": dropped, "generation_failures": generation, "by_server": served}


__all__ = ["PARENT_ENV", "RETRIES", "ShardProgress", "added", "child_argv", "close_shards", "die_with_parent", "merge_shards", "open_shards", "redistribute", "run_shards", "write_stats"]
