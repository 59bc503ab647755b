"""A run's health: every rollout of its files checked (`_checks`), rollouts that claim one
identity flagged, the task checks over each task's repeats, and NeMo Gym's two reports
(`quality_summary.json`, `rollout_verdicts.jsonl`) with its one-line report."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from gym_metrics.health._checks import CHECKS, ROLLOUT, ROLLOUT_CHECKS, TASK, Digest, check_ignored, check_rollout, finding

SUMMARY_FILE = "quality_summary.json"
VERDICTS_FILE = "rollout_verdicts.jsonl"


@dataclass
class Health:
    """A run's health: the summary, each rollout's digest, and where the reports went."""

    summary: dict[str, Any]
    rollouts: list[Digest]
    summary_path: Path
    verdicts_path: Path

    def line(self) -> str:
        """NeMo Gym's report: the verdict counts (and the ignored checks), then the summary's path."""
        verdicts = self.summary["run"]["verdicts"]
        ignored = self.summary["run"]["ignored_checks"]
        note = f" (ignored: {', '.join(ignored)})" if ignored else ""
        return (f"Rollout health: {sum(verdicts.values())} checked, {verdicts['healthy']} healthy, {verdicts['unhealthy']} unhealthy, "
                f"{verdicts['unobserved']} unobserved{note}\nQuality summary: {self.summary_path}")  # fmt: skip


def _read(paths: Sequence[Path], ignored: frozenset[str]) -> list[Digest]:
    digests = []
    ordinal = 0
    for source, path in enumerate(paths):
        with path.open("rb") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    record = orjson.loads(line)
                    error = None if isinstance(record, dict) else "ValueError"
                except orjson.JSONDecodeError:
                    record, error = {}, "JSONDecodeError"
                digests.append(check_rollout(record if error is None else {}, error, (str(path), source, number, ordinal), ignored))
                ordinal += 1
    return digests


def _flag_duplicates(digests: list[Digest], ignored: frozenset[str]) -> None:
    if "rollout_duplicate_identity" in ignored:
        return
    groups: dict[tuple[Any, Any, Any], list[Digest]] = defaultdict(list)
    for d in digests:
        groups[(d.stage, d.task, d.rollout)].append(d)
    for copies in groups.values():
        if len(copies) > 1:
            for d in copies:
                d.findings.append(finding("rollout_duplicate_identity", {"duplicate_count": len(copies)}))


@dataclass(frozen=True)
class _Repeat:
    verdict: str
    policy_calls_observed: bool
    successful_calls: int


def _repeats(digests: Iterable[Digest]) -> list[_Repeat]:
    """A task's repeats, records of one repeat folded into one (verdicts that differ: unobserved)."""
    by_repeat: dict[Any, list[Digest]] = defaultdict(list)
    for d in digests:
        by_repeat[d.rollout].append(d)
    return [_Repeat(next(iter(v)) if len(v := {c.verdict for c in copies}) == 1 else "unobserved",
                    all(c.policy_calls_observed for c in copies), max(c.successful_calls for c in copies))
            for copies in by_repeat.values()]  # fmt: skip


def _task_checks(tasks: dict[Any, list[_Repeat]], ignored: frozenset[str]) -> tuple[dict[Any, list[dict[str, Any]]], dict[str, dict[str, int]]]:
    flags: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    coverage = {c: {"evaluated": 0, "unobserved": 0, "ignored": 0} for c in ("task_consistently_unhealthy", "task_no_successful_model_calls")}
    for task, repeats in tasks.items():
        if "task_consistently_unhealthy" in ignored:
            coverage["task_consistently_unhealthy"]["ignored"] += 1
        else:
            computable = [r for r in repeats if r.verdict != "unobserved"]
            if len(computable) >= 2:
                coverage["task_consistently_unhealthy"]["evaluated"] += 1
                if all(r.verdict == "unhealthy" for r in computable):
                    flags[task].append(finding("task_consistently_unhealthy", {"computable_repeats": len(computable)}))
            else:
                coverage["task_consistently_unhealthy"]["unobserved"] += 1
        if "task_no_successful_model_calls" in ignored:
            coverage["task_no_successful_model_calls"]["ignored"] += 1
        elif repeats and all(r.policy_calls_observed for r in repeats):
            coverage["task_no_successful_model_calls"]["evaluated"] += 1
            if not any(r.successful_calls for r in repeats):
                flags[task].append(finding("task_no_successful_model_calls", {"repeats": len(repeats)}))
        else:
            coverage["task_no_successful_model_calls"]["unobserved"] += 1
    return flags, coverage


def summarize(digests: list[Digest], ignored: Sequence[str]) -> dict[str, Any]:
    """NeMo Gym's quality summary of a run's digests."""
    skip = frozenset(ignored)
    by_task: dict[Any, list[Digest]] = defaultdict(list)
    for d in digests:
        by_task[d.task].append(d)
    tasks = {task: _repeats(records) for task, records in by_task.items()}
    flags, task_coverage = _task_checks(tasks, skip)
    coverage = {c: {"evaluated": 0, "unobserved": 0, "ignored": 0} for c in CHECKS}
    for d in digests:
        unobserved = set(d.unobserved)
        for check in ROLLOUT_CHECKS:
            coverage[check]["ignored" if check in skip else "unobserved" if check in unobserved else "evaluated"] += 1
    coverage.update(task_coverage)
    issues = Counter(f["check"] for d in digests for f in d.findings)
    issues.update(f["check"] for found in flags.values() for f in found)
    verdicts = Counter(d.verdict for d in digests)
    statuses: Counter[str] = Counter()
    for d in digests:
        statuses.update(d.errors_by_status)
    per_task = {}
    for task in sorted(tasks, key=lambda v: (isinstance(v, str), str(v))):
        counted = Counter(r.verdict for r in tasks[task])
        per_task[str(task)] = {"repeats": len(tasks[task]), "healthy": counted["healthy"], "unhealthy": counted["unhealthy"],
                               "unobserved": counted["unobserved"], "flags": [f["check"] for f in flags[task]]}  # fmt: skip
    return {
        "run": {
            "ignored_checks": sorted(skip),
            "artifacts": {"records": len(digests), "captures": sum(d.calls_seen for d in digests), "coverage": coverage},
            "verdicts": {v: verdicts[v] for v in ("healthy", "unhealthy", "unobserved")},
            "issues": {c: issues[c] for c in CHECKS},
            "stats": {
                "model_call_errors": {
                    "total": sum(d.call_errors for d in digests), "by_status": dict(sorted(statuses.items())),
                    "rollouts_affected": sum(bool(d.call_errors) for d in digests), "ended_on_error": sum(d.ended_on_error for d in digests),
                },
                "duplicated_calls": {"replayed": sum(d.duplicated_calls for d in digests), "rollouts": sum(bool(d.duplicated_calls) for d in digests)},
                "tokens": {
                    "prompt": sum(d.usage_prompt for d in digests), "completion": sum(d.usage_completion for d in digests),
                    "capture_prompt": sum(d.capture_prompt for d in digests), "capture_completion": sum(d.capture_completion for d in digests),
                },
            },
        },
        "tasks": per_task,
    }  # fmt: skip


def _order(d: Digest) -> tuple[tuple[int, Any], ...]:
    return tuple((0, v) if isinstance(v, int) else (1, str(v)) for v in (d.task, d.rollout, d.stage))


def check_health(paths: Path | Sequence[Path], *, output_dir: Path | None = None, ignore: Iterable[str] = ()) -> Health:
    """Checks every rollout of `paths` and writes the two reports into `output_dir` (default:
    the first file's folder), as NeMo Gym's `gym eval health-check` does."""
    files = [paths] if isinstance(paths, Path) else list(paths)
    if not files:
        raise ValueError("at least one rollouts file is needed")
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(f"rollouts file not found: {path}")
    ignored = check_ignored(ignore)
    digests = _read(files, frozenset(ignored))
    _flag_duplicates(digests, frozenset(ignored))
    summary = summarize(digests, ignored)
    out = output_dir or files[0].parent
    out.mkdir(parents=True, exist_ok=True)
    summary_path, verdicts_path = out / SUMMARY_FILE, out / VERDICTS_FILE
    summary_path.write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    with verdicts_path.open("wb") as f:
        for d in sorted(digests, key=_order):
            row = {TASK: d.task, ROLLOUT: d.rollout, "rollout_id": d.rollout_id, "verdict": d.verdict, "findings": d.findings, "unobserved": d.unobserved}
            if d.stage is not None:
                row["stage_index"] = d.stage
            f.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))
    return Health(summary, digests, summary_path, verdicts_path)
