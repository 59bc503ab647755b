"""The resume and dispatch helpers of NeMo Gym's rollout collection that an environment driving
its own collection imports (gdpval's multistage orchestrator), re-exported by
`rollout_collection`: the attempt cap, per-rollout elapsed time, which persisted failures stay
final on resume, the dispatcher's latency tracker, and the migration of legacy invalid-judge
rows from the rollouts file to its failures sidecar."""

from __future__ import annotations

import bisect
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

import orjson

from gym_metrics.nemo_gym.deliverables import is_deliverable
from gym_metrics.nemo_gym.global_config import ATTEMPT_INDEX_KEY_NAME, ROLLOUT_INDEX_KEY_NAME, TASK_INDEX_KEY_NAME
from gym_metrics.nemo_gym.path_utils import failures_path_for

NG_FAILURE_CLASS_KEY = "_ng_failure_class"
NG_TERMINAL_KEY = "_ng_failure_terminal"
NG_ELAPSED_KEY = "elapsed_seconds"
DEFAULT_MAX_ROLLOUT_ATTEMPTS = 3
MIGRATED_INVALID_JUDGE_KEY = "_ng_migrated_invalid_judge_response"
_RETRYABLE_CLASSES = ("timeout_exceeded", "reference_missing", "eval_missing", "transport_ineligible")
"""Classes a repaired environment or a later attempt can get past (with retry_terminal_timeouts)."""


def get_max_rollout_attempts() -> int:
    """`NEMO_GYM_MAX_ROLLOUT_ATTEMPTS` (a positive int), else 3; a bad value warns and gives 3."""
    given = os.environ.get("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS")
    if not given:
        return DEFAULT_MAX_ROLLOUT_ATTEMPTS
    try:
        attempts = int(given)
        if attempts < 1:
            raise ValueError(f"must be >= 1, got {attempts}")
    except ValueError as exc:
        print(f"WARNING: could not parse NEMO_GYM_MAX_ROLLOUT_ATTEMPTS={given!r} ({exc}); "
              f"falling back to default {DEFAULT_MAX_ROLLOUT_ATTEMPTS}.", flush=True)  # fmt: skip
        return DEFAULT_MAX_ROLLOUT_ATTEMPTS
    return attempts


def observed_elapsed(record: Mapping[str, Any]) -> Optional[float]:
    """A row's wall time in seconds (its own `elapsed_seconds`, else its response metadata's),
    when positive."""
    metadata = (record.get("response") or {}).get("metadata") or {}
    for given in (record.get(NG_ELAPSED_KEY), metadata.get(NG_ELAPSED_KEY)):
        try:
            seconds = float(given) if given is not None else 0.0
        except (TypeError, ValueError):
            continue
        if seconds > 0:
            return seconds
    return None


def is_terminal_failure(record: Mapping[str, Any], *, retry_terminal_timeouts: bool = False) -> bool:
    """Whether a persisted failure stays final on resume: its `_ng_failure_terminal` stamp;
    with `retry_terminal_timeouts`, a timeout and the environment faults of _RETRYABLE_CLASSES
    never are, a skipped sample always is."""
    kind = record.get(NG_FAILURE_CLASS_KEY)
    if retry_terminal_timeouts and kind in _RETRYABLE_CLASSES:
        return False
    if retry_terminal_timeouts and kind == "skipped":
        return True
    return bool(record.get(NG_TERMINAL_KEY))


class DispatchLatencyTracker:
    """The per-task latencies a dispatcher saw (kept sorted), the tasks it drained for lack of
    time, and the margin a task needs before it is worth starting."""

    def __init__(self) -> None:
        self._durations: list[float] = []
        self._drained = 0

    def record(self, seconds: float) -> None:
        if seconds > 0:
            bisect.insort(self._durations, seconds)

    def record_drained(self) -> None:
        self._drained += 1

    @property
    def drained(self) -> int:
        return self._drained

    def quantile(self, q: float) -> Optional[float]:
        """Linear between the ranks; None before any latency."""
        if not self._durations:
            return None
        at = (len(self._durations) - 1) * q
        low = int(at)
        high = min(low + 1, len(self._durations) - 1)
        return self._durations[low] * (1 - (at - low)) + self._durations[high] * (at - low)

    def drain_margin(self, configured: Optional[float]) -> Optional[float]:
        """The configured margin, else this run's p75 once five tasks finished."""
        if configured is not None:
            return configured
        return self.quantile(0.75) if len(self._durations) >= 5 else None

    def summary(self) -> str:
        if self._durations:
            minutes = [(self.quantile(q) or 0.0) / 60 for q in (0.5, 0.9, 0.99)]
            lines = [f"Per-task latency over {len(self._durations)} completed rollout(s): median {minutes[0]:.1f} min, "
                     f"p90 {minutes[1]:.1f} min, p99 {minutes[2]:.1f} min, max {self._durations[-1] / 60:.1f} min",
                     f"Task-time delivered: {sum(self._durations) / 3600:.1f} task-hours"]  # fmt: skip
        else:
            lines = ["No completed rollouts to report latency for."]
        if self._drained:
            lines.append(f"Drained (not dispatched, no time left in the budget): {self._drained}. "
                         "These wrote no row and will be re-dispatched on resume.")  # fmt: skip
        return "\n".join(lines)


def _migration_key(row: Mapping[str, Any]) -> tuple[Any, Any, Any, Any]:
    return int(row.get("stage_index", 0) or 0), row.get(TASK_INDEX_KEY_NAME), row.get(ROLLOUT_INDEX_KEY_NAME), int(row.get(ATTEMPT_INDEX_KEY_NAME, 0) or 0)


def _lines(path: Path) -> list[tuple[bytes, dict[str, Any]]]:
    """Each non-blank line, stripped, with its row."""
    with path.open("rb") as handle:
        return [(line.strip(), orjson.loads(line)) for line in handle if line.strip()]


def _has_deliverable(folder: Any) -> bool:
    try:
        return bool(folder) and Path(folder).is_dir() and any(is_deliverable(p) for p in Path(folder).iterdir())
    except (OSError, TypeError):
        return False


def migrate_invalid_judge_main_rows(output_fpath: Path) -> int:
    """Rows an older build kept in the rollouts file with `invalid_judge_response` set move to
    its failures sidecar, classed `judge_invalid` and retryable (marked, so a second run moves
    nothing twice; `reuse_cached_deliverable` when their deliverables are still there); the
    sidecar is synced before the rollouts file is replaced. The count of such rows found."""
    if not output_fpath.exists():
        return 0
    rows = _lines(output_fpath)
    found = sum(1 for _, row in rows if row.get("invalid_judge_response"))
    if not found:
        return 0
    sidecar = failures_path_for(output_fpath)
    sidecar.parent.mkdir(parents=True, exist_ok=True)
    moved = {_migration_key(row) for _, row in (_lines(sidecar) if sidecar.exists() else []) if row.get(MIGRATED_INVALID_JUDGE_KEY)}
    mode = output_fpath.stat().st_mode & 0o7777
    handle, name = tempfile.mkstemp(dir=output_fpath.parent, prefix=f".{output_fpath.name}.migrate-")
    try:
        with os.fdopen(handle, "wb") as kept, sidecar.open("ab") as failures:
            for line, row in rows:
                if not row.get("invalid_judge_response"):
                    kept.write(line + b"\n")  # as it was
                    continue
                if _migration_key(row) in moved:
                    continue
                migrated = {**row, NG_FAILURE_CLASS_KEY: row.get(NG_FAILURE_CLASS_KEY) or "judge_invalid"}
                migrated.pop(NG_TERMINAL_KEY, None)
                if _has_deliverable(row.get("deliverables_dir")):
                    migrated["reuse_cached_deliverable"] = True
                else:
                    migrated.pop("reuse_cached_deliverable", None)
                migrated[MIGRATED_INVALID_JUDGE_KEY] = True
                failures.write(orjson.dumps(migrated) + b"\n")
                moved.add(_migration_key(row))
            failures.flush()
            os.fsync(failures.fileno())
            kept.flush()
            os.fsync(kept.fileno())
        os.chmod(name, mode)
        os.replace(name, output_fpath)
    finally:
        Path(name).unlink(missing_ok=True)
    return found


__all__ = [
    "DispatchLatencyTracker",
    "get_max_rollout_attempts",
    "is_terminal_failure",
    "migrate_invalid_judge_main_rows",
    "observed_elapsed",
]
