"""The collector's output JSONL: appended as rollouts complete, repaired and indexed on resume."""

from __future__ import annotations

from pathlib import Path
from typing import IO

from gym_metrics.rollouts import read_rollouts
from gym_metrics.errors import GymMetricsError

RolloutKey = tuple[str, int, int]
"""(agent, task, rollout)."""


class OutputFile:
    """Append-only JSONL of verified rollouts; every write is flushed to the OS, so a killed
    run loses at most the line it was writing, which `open(resume=True)` cuts off. (No fsync:
    surviving a power cut is not worth seconds per million rows here.)"""

    def __init__(self, path: Path, resume: bool, default_agent: str | None = None, reverifying: bool = False) -> None:
        """`resume`: continue `path`: the rollouts in it and in its failures sidecar are done
        (a resumed run attempts each rollout once, as one never cut does; `--reverify-failed`,
        `reverifying`, is what attempts the sidecar's again)."""
        self.path = path
        self.done: set[RolloutKey] = set()
        self.repaired_bytes = 0
        if resume and path.exists():
            self.repaired_bytes = _cut_partial_last_line(path)
            self.done = _keys_in(path, default_agent)
        elif path.exists() and path.stat().st_size:
            raise GymMetricsError(f"{path} exists and is not empty: pass --resume to continue it, or remove it")
        sidecar = failures_path_for(path)
        if resume and not reverifying and sidecar.exists():  # attempted and dropped: done, as in a run never cut
            self.repaired_bytes += _cut_partial_last_line(sidecar)
            self.done |= _keys_in(sidecar, default_agent)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f: IO[bytes] = path.open("ab")

    def write(self, lines: list[bytes]) -> None:
        self._f.write(b"".join(lines))
        self._f.flush()

    def close(self) -> None:
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


def _keys_in(path: Path, default_agent: str | None = None) -> set[RolloutKey]:
    """Every (agent, task, rollout) already written (`default_agent`: of rows without one)."""
    if path.stat().st_size == 0:
        return set()
    done: set[RolloutKey] = set()
    for agent, cols in read_rollouts(path, on_bad_line="fail", default_agent=default_agent).agents.items():
        done.update((agent, t, r) for t, r in zip(cols.task_index.tolist(), cols.rollout_index.tolist()))
    return done
