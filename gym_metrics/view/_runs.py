"""What the viewer was pointed at, as runs: a rollouts file (`collect`'s output, growing while
a collect writes it) with its metrics file (`<stem>_aggregate_metrics.json`) and health verdicts
(`rollout_verdicts.jsonl`) beside it; a metrics file alone is a run without rows; an
evaluation's or a job's result (`<stem>_<scorer>_results.json`) is a run of scored rows. A
folder gives every such file in it. Requests name runs by number, never by path: the viewer serves
these files and nothing else."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from gym_metrics.aggregate import counted_errors_as_zero
from gym_metrics.errors import InvalidInputError
from gym_metrics.health import VERDICTS_FILE
from gym_metrics.view._index import Indexed, RunIndex
from gym_metrics.view._results import RESULTS_SUFFIX, ResultsFile
from gym_metrics.view._rollout import nests_deeper

METRICS_SUFFIX = "_aggregate_metrics.json"
NOT_ROLLOUTS = frozenset({VERDICTS_FILE, "manifest.jsonl", "refused.jsonl"})
"""JSONL files a folder may hold that are not rollouts (health verdicts, ATIF export lists)."""
MAX_METRICS_BYTES = 256 << 20
MAX_METRICS_DEPTH = 400
"""A metrics file nested deeper is not shown (a sample holds a row as deep as it was)."""


@dataclass
class Run:
    """One run: its rollouts index (None for a metrics file alone) and its metrics file, or a
    scorer results file."""

    name: str
    index: RunIndex | None
    metrics_path: Path | None
    results: ResultsFile | None = None
    _metrics: tuple[float, Any] = field(default=(-1.0, None), repr=False)

    def metrics(self) -> Any:
        """The metrics file's agents (as written), read again when it changes; None without one."""
        if self.metrics_path is None or not self.metrics_path.is_file():
            return None
        mtime = self.metrics_path.stat().st_mtime
        if mtime != self._metrics[0]:
            if self.metrics_path.stat().st_size > MAX_METRICS_BYTES:
                data: Any = {"error": f"{self.metrics_path.name} is over {MAX_METRICS_BYTES >> 20} MB: not read"}
            else:
                try:
                    data = orjson.loads(self.metrics_path.read_bytes())
                except orjson.JSONDecodeError as exc:
                    data = {"error": f"{self.metrics_path.name} is not JSON ({exc}); a collect may be writing it"}
                else:
                    data = _sendable(data, self.metrics_path.name)
            self._metrics = (mtime, data)
        return self._metrics[1]

    def zero_agents(self, snap: Indexed) -> np.ndarray | None:
        """Per agent code of `snap`, whether the metrics file beside counted that agent's
        failed rows as 0 (`aggregate --count-errors-as-zero`: inferred, the file does not record
        it); None when it counted none so (or there is no file, or it does not fit the rows)."""
        metrics, c = self.metrics(), snap.columns
        if not isinstance(metrics, list) or not (c.error != 0).any():
            return None
        zero = np.zeros(len(snap.agents), bool)
        for entry in metrics:
            name = entry.get("agent_ref", {}).get("name") if isinstance(entry, dict) and isinstance(entry.get("agent_ref"), dict) else None
            if name in snap.agents:
                code = snap.agents.index(name)
                mine = c.agent == code
                zero[code] = counted_errors_as_zero(entry.get("group_level_metrics"), c.masked[mine], c.error[mine] != 0)
        return zero if zero.any() else None


def _sendable(data: Any, name: str) -> Any:
    """The metrics as read, or an error when they nest past MAX_METRICS_DEPTH: the answer's
    JSON writer (json's, past orjson's 254 levels) recurses, and would fail near 1,000."""
    try:
        orjson.dumps(data)
        return data  # within orjson's 254 levels: the usual case, checked in C
    except orjson.JSONEncodeError:
        pass
    if nests_deeper(data, MAX_METRICS_DEPTH):
        return {"error": f"{name} nests deeper than {MAX_METRICS_DEPTH} levels: not shown"}
    return data


def metrics_beside(rollouts: Path) -> Path:
    return rollouts.with_name(rollouts.stem + METRICS_SUFFIX)


def find_runs(paths: Sequence[Path]) -> list[Run]:
    """The runs of `paths` (files or folders), in the order given (a folder's files by name);
    InvalidInputError naming a path that does not exist or is neither kind of file."""
    rollouts: list[Path] = []
    metrics_only: list[Path] = []
    results: list[Path] = []
    for path in paths:
        if path.is_dir():
            rollouts += sorted(p for p in path.glob("*.jsonl") if p.name not in NOT_ROLLOUTS)
            metrics_only += sorted(path.glob(f"*{METRICS_SUFFIX}"))
            results += sorted(path.glob(f"*{RESULTS_SUFFIX}"))
        elif path.name.endswith(METRICS_SUFFIX) and path.is_file():
            metrics_only.append(path)
        elif path.name.endswith(RESULTS_SUFFIX) and path.is_file():
            results.append(path)
        elif path.is_file():
            rollouts.append(path)
        else:
            raise InvalidInputError(f"{path}: no such file or folder")
    seen: set[Path] = set()
    runs = []
    for p in rollouts:
        if p.resolve() not in seen:
            seen.add(p.resolve())
            runs.append(Run(p.name, RunIndex(p, p.parent / VERDICTS_FILE), metrics_beside(p)))
    paired = {metrics_beside(p).resolve() for p in rollouts}
    for m in metrics_only:
        if m.resolve() not in paired and m.resolve() not in seen:
            seen.add(m.resolve())
            runs.append(Run(m.name, None, m))
    for r in results:
        if r.resolve() not in seen:
            seen.add(r.resolve())
            runs.append(Run(r.name, None, None, ResultsFile(r)))
    if not runs:
        raise InvalidInputError(f"no rollouts (.jsonl), metrics ({METRICS_SUFFIX}) or results ({RESULTS_SUFFIX}) files in {', '.join(map(str, paths))}")
    return runs
